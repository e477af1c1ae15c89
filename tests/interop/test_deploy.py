# SPDX-License-Identifier: Apache-2.0
"""The deployment files of issue 29: the Debian package scripts/package.sh builds from the tree
(its Depends against the binary's own NEEDED libraries and their owning Debian packages, its
files), the systemd unit it ships (`systemd-analyze verify` on the package's root and
`systemd-analyze security --offline` for the hardening), and the packaged binary unpacked with
`dpkg -x` and run with the unit's own ExecStart (instance paths mapped into a temporary root)
on the packaged example source.json and streams.json: a copy and streamed changes from a real
PostgreSQL land in the Iceberg tables (read back with pyiceberg), the state and key index land in
the unit's state folder, and SIGTERM stops it with exit 0 (what systemd's stop sends)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from firnutil import stop_process, wait_for
from test_metrics import alive, free_port, get, scrape, value

REPO = Path(__file__).resolve().parents[2]
# The runtime libraries firn links (cmake/FirnDeps.cmake), by their Debian 12 package names.
RUNTIME_PACKAGES = {"libpq5", "libcurl4", "libjansson4", "libzstd1", "libsnappy1v5", "zlib1g",
                    "libsqlite3-0", "libmicrohttpd12", "libssl3", "libc6"}
UNIT = "lib/systemd/system/firn@.service"


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> tuple[Path, Path]:
    """(the .deb scripts/package.sh built, the root it was unpacked into with dpkg -x)."""
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run(["bash", str(REPO / "scripts" / "package.sh")], capture_output=True,
                       text=True, timeout=1200, env=dict(os.environ, FIRN_PKG_OUT=str(out)))
    assert r.returncode == 0, r.stderr[-4000:]
    path = Path(r.stdout.strip().splitlines()[-1])
    assert path.parent == out and path.name.endswith(".deb"), r.stdout
    root = out / "root"
    subprocess.run(["dpkg", "-x", str(path), str(root)], check=True, timeout=60)
    return path, root


def control(deb_path: Path) -> dict[str, str]:
    text = subprocess.run(["dpkg-deb", "-f", str(deb_path)], capture_output=True, text=True,
                          check=True).stdout
    fields, key = {}, None
    for line in text.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
        else:
            key, _, val = line.partition(":")
            fields[key] = val.strip()
    return fields


def depends(fields: dict[str, str]) -> dict[str, str]:
    """Depends as {package: version constraint ('' for none)}; no alternatives expected."""
    out = {}
    for item in fields["Depends"].split(","):
        item = item.strip()
        assert "|" not in item, item
        m = re.fullmatch(r"([a-z0-9][a-z0-9+.-]+)(?: \((.+)\))?", item)
        assert m, f"unparsable Depends item {item!r}"
        out[m.group(1)] = m.group(2) or ""
    return out


def owner(path: str) -> str:
    """The Debian package that installed the library at path (merged /usr: either spelling)."""
    real = os.path.realpath(path)
    for cand in dict.fromkeys([path, real, re.sub(r"^/usr/lib/", "/lib/", real),
                               re.sub(r"^/lib/", "/usr/lib/", real)]):
        r = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    raise AssertionError(f"no installed package owns {path} ({real})")


def test_package_depends_and_files(deb):
    deb_path, root = deb
    fields = control(deb_path)
    assert fields["Package"] == "firn"
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert fields["Version"] == re.search(r"project\(firn VERSION (\S+)", cmake).group(1)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert fields["Architecture"] == arch
    deps = depends(fields)
    assert RUNTIME_PACKAGES <= set(deps), f"missing from Depends: {RUNTIME_PACKAGES - set(deps)}"

    # Every library the binary needs directly comes from a package in Depends: no sanitizer
    # runtime, nothing left out.
    firn = root / "usr" / "bin" / "firn"
    needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(
        ["objdump", "-p", str(firn)], capture_output=True, text=True, check=True).stdout)
    assert needed and not any("asan" in n or "ubsan" in n for n in needed), needed
    resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(
        ["ldd", str(firn)], capture_output=True, text=True, check=True).stdout, re.M))
    for soname in needed:
        assert soname in resolved, f"ldd does not resolve {soname}"
        pkg = owner(resolved[soname]).split(",")[0]
        assert pkg.split(":")[0] in deps, f"{soname} comes from {pkg}, not in Depends {deps}"

    # Each dependency is satisfied by what this Debian 12 machine has installed.
    for pkg, constraint in deps.items():
        have = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                              capture_output=True, text=True)
        assert have.returncode == 0 and have.stdout, f"{pkg} is not installed"
        if constraint:
            op, ver = constraint.split()
            assert subprocess.run(["dpkg", "--compare-versions", have.stdout, op.replace(
                ">=", "ge").replace("<=", "le").replace("=", "eq"), ver]).returncode == 0, (
                f"{pkg} {have.stdout} does not satisfy {constraint}")

    listing = subprocess.run(["dpkg-deb", "-c", str(deb_path)], capture_output=True, text=True,
                             check=True).stdout
    files = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    for want in ("/usr/bin/firn", "/" + UNIT, "/usr/share/doc/firn/README.md",
                 "/usr/share/doc/firn/operations.md", "/usr/share/doc/firn/copyright",
                 "/usr/share/doc/firn/examples/source.json",
                 "/usr/share/doc/firn/examples/destination.json",
                 "/usr/share/doc/firn/examples/streams.json",
                 "/usr/share/doc/firn/examples/firn.env",
                 "/usr/share/doc/firn/deploy/docker/Dockerfile",
                 "/usr/share/doc/firn/deploy/kubernetes/deployment.yaml",
                 "/usr/share/doc/firn/deploy/grafana/firn.json",
                 "/usr/share/doc/firn/deploy/prometheus/firn-alerts.yml"):
        assert want in files, f"{want} is not in the package"
    assert not [f for f in files if f.startswith(("/etc/", "/var/", "/usr/local/"))], files
    version = subprocess.run([str(firn), "version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"firn version {fields['Version']} (build "), version.stdout


def env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines of a systemd EnvironmentFile (no quoting used in ours)."""
    pairs = [ln.split("=", 1) for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert all(len(p) == 2 and re.fullmatch(r"[A-Z_][A-Z0-9_]*", p[0]) for p in pairs), pairs
    return dict(pairs)


def expand(doc, env: dict[str, str]):
    """${VAR} and ${VAR:-default} in the strings of doc, as firn expands them (one level; a
    string that is one reference and expands to digits is a number, as firn takes it)."""
    if isinstance(doc, dict):
        return {k: expand(v, env) for k, v in doc.items()}
    if isinstance(doc, list):
        return [expand(v, env) for v in doc]
    if not isinstance(doc, str):
        return doc

    def one(m):
        name, default = m.group(1), m.group(3)
        assert name in env or default is not None, f"${{{name}}} is not in firn.env"
        return env.get(name, default)

    ref = r"\$\{([A-Z_][A-Z0-9_]*)(:-([^}]*))?\}"
    out = re.sub(ref, one, doc)
    if re.fullmatch(ref, doc) and re.fullmatch(r"-?[0-9]+", out):
        return int(out)  # "port": "${PGPORT:-5432}" is a number once expanded
    return out


def test_examples_match_the_schemas(deb):
    """The packaged example files, expanded with the packaged firn.env, are valid for the
    packaged binary's own JSON Schemas (`firn spec`), which refuse unknown keys."""
    import jsonschema

    _, root = deb
    firn = root / "usr" / "bin" / "firn"
    examples = root / "usr/share/doc/firn/examples"
    env = env_file((examples / "firn.env").read_text())
    for kind in ("source", "destination", "streams"):
        schema = json.loads(subprocess.run([str(firn), "spec", kind], capture_output=True,
                                           text=True, check=True).stdout)
        doc = expand(json.loads((examples / f"{kind}.json").read_text()), env)
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
        assert not errors, f"examples/{kind}.json: {errors}"


def verify_root(root: Path, tmp_path: Path) -> Path:
    """A copy of the package root that also holds this machine's systemd targets and slices,
    which the unit's default dependencies name (systemd-analyze --root resolves them there)."""
    vroot = tmp_path / "vroot"
    shutil.copytree(root, vroot, symlinks=True)
    units = vroot / "lib" / "systemd" / "system"
    for f in Path("/lib/systemd/system").iterdir():
        if f.suffix in (".target", ".slice") and f.is_file() and not f.is_symlink():
            shutil.copy2(f, units / f.name)
    return vroot


def test_systemd_unit_verifies(deb, tmp_path):
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing (Debian package systemd; scripts/setup.sh)"
    _, root = deb
    vroot = verify_root(root, tmp_path)
    r = subprocess.run([tool, "verify", "--man=no", f"--root={vroot}", "firn@shop.service"],
                       capture_output=True, text=True, timeout=60)
    # Unknown keys and bad values are only warnings to verify: none may appear.
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr

    # A broken copy must fail the same check, or the check proves nothing.
    unit = vroot / UNIT
    good = unit.read_text()
    unit.write_text(good.replace("ProtectSystem=strict", "ProtectSystem=strictest"))
    r = subprocess.run([tool, "verify", "--man=no", f"--root={vroot}", "firn@shop.service"],
                       capture_output=True, text=True, timeout=60)
    assert "strictest" in r.stderr, r.stderr
    unit.write_text(good)

    r = subprocess.run([tool, "security", "--offline=yes", f"--root={vroot}", "--no-pager",
                        "firn@shop.service"], capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for firn@shop\.service: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 2.0, f"exposure {m.group(1)} (0 best, 10 worst):\n{r.stdout}"
    for line in ("DynamicUser=yes", "StateDirectory=firn/%i", "ProtectSystem=strict",
                 "NoNewPrivileges=yes", "PrivateTmp=yes", "Restart=on-failure"):
        assert line in good.splitlines(), line


def exec_start(unit_text: str) -> list[str]:
    """ExecStart of the unit as argv (continuation lines joined)."""
    joined = re.sub(r"\\\n", " ", unit_text)
    lines = [ln for ln in joined.splitlines() if ln.startswith("ExecStart=")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0][len("ExecStart="):])


def test_packaged_firn_runs_the_unit(deb, pg, pg_db, tmp_path):
    """The unit's command line, with /etc/firn, %i and %S mapped into tmp_path, on the packaged
    binary and the packaged example source.json and streams.json."""
    _, root = deb
    instance = "shop"
    etc = tmp_path / "etc" / "firn" / instance
    state_root = tmp_path / "var" / "lib"  # %S
    state_dir = state_root / "firn" / instance  # StateDirectory=firn/%i, made by systemd
    etc.mkdir(parents=True)
    state_dir.mkdir(parents=True, mode=0o700)
    examples = root / "usr" / "share" / "doc" / "firn" / "examples"
    shutil.copy(examples / "source.json", etc / "source.json")
    shutil.copy(examples / "streams.json", etc / "streams.json")
    warehouse = tmp_path / "warehouse"
    catalog_db = state_dir / "catalog.db"
    (etc / "destination.json").write_text(json.dumps({
        "catalog": {"type": "sql", "name": "firn", "uri": f"sqlite:///{catalog_db}",
                    "warehouse": f"file://{warehouse}"},
        "namespace": "shop_{schema}", "index_dir": f"{state_dir}/index",
        "commit": {"interval_seconds": 0.5}}))

    port = free_port()
    argv = exec_start((root / UNIT).read_text())
    assert argv[0] == "/usr/bin/firn" and "--follow" in argv, argv
    argv = [a.replace("%i", instance).replace("%S", str(state_root))
            .replace("/etc/firn/", f"{tmp_path}/etc/firn/")
            .replace("${FIRN_METRICS_LISTEN}", f"127.0.0.1:{port}") for a in argv]
    argv[0] = str(root / "usr" / "bin" / "firn")
    assert not [a for a in argv if "%" in a or "$" in a], argv

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FIRN_", "ASAN", "UBSAN"))}
    env.update(FIRN_PG_HOST=pg.host, FIRN_PG_PORT=str(pg.port), FIRN_PG_DATABASE=pg_db,
               FIRN_PG_USER=pg.user, FIRN_PG_PASSWORD="unused-under-trust",
               FIRN_PG_SSLMODE="disable")
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, amount numeric(10, 2), note text);"
                     "CREATE TABLE customers (id bigint PRIMARY KEY, name text);"
                     "INSERT INTO orders SELECT g, g * 1.5, 'o' || g FROM generate_series(1, 200) g;"
                     "INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 20) g;"
                     "CREATE PUBLICATION firn_shop FOR TABLE orders, customers")
        log_path = tmp_path / "firn.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, cwd=state_dir, env=env, stdout=log, stderr=log)
        orders = {"stream": "public.orders", "table": "shop_public.orders"}
        customers = {"stream": "public.customers", "table": "shop_public.customers"}
        try:
            wait_for(lambda: alive(port) or proc.poll() is not None, 60, interval=0.2,
                     what="/healthz")
            assert proc.poll() is None, log_path.read_text()[-4000:]

            def copied():
                f = scrape(port)
                return f if (value(f, "firn_rows_written_total", **orders) == 200 and
                             value(f, "firn_rows_written_total", **customers) == 20 and
                             value(f, "firn_backfill_pending", **orders) == 0) else None

            wait_for(copied, 90, interval=0.2, what="the copy")
            conn.execute("INSERT INTO orders SELECT g, g, 'late' FROM generate_series(201, 230) g;"
                         "UPDATE orders SET note = 'changed' WHERE id <= 10;"
                         "DELETE FROM orders WHERE id BETWEEN 11 AND 15")
            want = conn.execute("SELECT id, amount::text, note FROM orders ORDER BY id").fetchall()
            from pyiceberg.catalog.sql import SqlCatalog

            catalog = SqlCatalog("firn", uri=f"sqlite:///{catalog_db}",
                                 warehouse=f"file://{warehouse}")

            def table_rows():
                t = catalog.load_table("shop_public.orders").scan(
                    selected_fields=("id", "amount", "note")).to_arrow().to_pylist()
                return sorted((r["id"], f"{r['amount']:.2f}", r["note"]) for r in t)

            wait_for(lambda: table_rows() == [tuple(r) for r in want], 60, interval=0.3,
                     what="the orders table to equal the source")
            # The metrics the alert rules and the dashboard use are all in a real scrape.
            fams = wait_for(lambda: (lambda f: f if "firn_replication_lag_bytes" in f and
                                     value(f, "firn_replication_lag_bytes") is not None
                                     else None)(scrape(port)), 30, interval=0.5,
                            what="the replication lag in /metrics")
            used = deploy_metric_names()
            missing = {n for n in used if n not in fams and
                       re.sub(r"_(bucket|sum|count)$", "", n) not in fams}
            assert not missing, f"used in deploy/ but not served by firn: {sorted(missing)}"
            body = get(port, "/metrics")[2]
            r = subprocess.run([promtool(), "check", "metrics"], input=body, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            assert stop_process(proc, signal.SIGTERM, timeout=60) == 0, \
                log_path.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = 'firn_shop'")
    # The unit's state folder holds the state, the stats and the key index.
    assert json.loads((state_dir / "state.json").read_text())
    assert (state_dir / "stats.json").is_file()
    assert any((state_dir / "index" / "pkindex").iterdir())


# ---------------------------------------------------------------------------------------------
# The container recipe and the Kubernetes manifests

DOCKERFILE = REPO / "deploy" / "docker" / "Dockerfile"
K8S = REPO / "deploy" / "kubernetes"
VENV_BIN = Path(os.environ.get("FIRN_CACHE", Path.home() / ".cache" / "firn")) / "venv" / "bin"


def venv_tool(name: str) -> str:
    path = VENV_BIN / name
    assert path.is_file(), f"{path} is missing (scripts/setup.sh installs it from " \
                           "scripts/requirements-test.txt)"
    return str(path)


def unit_args_in(root: Path, etc: str, state: str, listen: str) -> list[str]:
    """The unit's ExecStart arguments (after the binary) for one instance folder layout."""
    return [a.replace("/etc/firn/%i", etc).replace("%S/firn/%i", state)
            .replace("${FIRN_METRICS_LISTEN}", listen)
            for a in exec_start((root / UNIT).read_text())[1:]]


def test_dockerfile(deb, tmp_path):
    """No Docker engine here: the Dockerfile is linted with hadolint (which must catch a known
    fault in a copy) and its shape checked: slim Debian base, the package from a build stage,
    a non-root user, the unit's command line."""
    hadolint = venv_tool("hadolint")
    r = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text().replace("--no-install-recommends", ""))
    r = subprocess.run([hadolint, str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "DL3015" in r.stdout, r.stdout + r.stderr

    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    froms = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    assert froms == ["debian:12-slim", "debian:12-slim"], froms
    final = lines[max(i for i, ln in enumerate(lines) if ln.startswith("FROM ")):]
    users = [ln.split()[1] for ln in final if ln.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    assert any("package.sh" in ln for ln in lines) and any(
        ln.startswith("COPY --from=build") for ln in final), lines
    assert json.loads(next(ln for ln in final if ln.startswith("ENTRYPOINT "))[11:]) == \
        ["/usr/bin/firn"]
    cmd = json.loads(next(ln for ln in final if ln.startswith("CMD "))[4:])
    assert cmd == unit_args_in(deb[1], "/etc/firn", "/var/lib/firn", "0.0.0.0:9187"), cmd
    # The build stage installs every -dev library setup.sh installs for building firn.
    setup = (REPO / "scripts" / "setup.sh").read_text()
    devs = set(re.findall(r"\b(lib[a-z0-9.+-]*-dev)\b", setup.split("APT_PACKAGES=(")[1]
                          .split(")")[0]))
    assert devs and devs <= set(text.split()), devs - set(text.split())


def manifests() -> dict[tuple[str, str], dict]:
    import yaml

    docs = {}
    for f in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def pod_spec(doc: dict) -> dict:
    return (doc["spec"]["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else doc["spec"])[
        "template"]["spec"]


def test_kubernetes_manifests(deb, tmp_path):
    """Every manifest passes kubernetes-validate --strict (the Kubernetes API schemas, bundled:
    no download; a misspelt field in a copy must fail), and they fit together: the workloads
    mount the ConfigMap's files where their arguments read them and the claim where the state
    and the key index go, take the Secret, probe the port firn serves, and the ConfigMap's files,
    expanded with the pods' env and the Secret, satisfy firn spec's schemas."""
    import jsonschema

    tool = venv_tool("kubernetes-validate")
    files = sorted(K8S.glob("*.yaml"))
    r = subprocess.run([tool, "--strict", *map(str, files)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(" passed for resource ") == len(manifests()), r.stdout
    bad = tmp_path / "deployment.yaml"
    bad.write_text((K8S / "deployment.yaml").read_text().replace("readinessProbe:",
                                                                 "readynessProbe:"))
    r = subprocess.run([tool, "--strict", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "readynessProbe" in r.stdout + r.stderr, r.stdout + r.stderr

    docs = manifests()
    config = docs[("ConfigMap", "firn-shop-config")]
    secret = docs[("Secret", "firn-shop-credentials")]
    assert ("PersistentVolumeClaim", "firn-shop-state") in docs
    firn = deb[1] / "usr" / "bin" / "firn"
    deploy = docs[("Deployment", "firn-shop")]
    cron = docs[("CronJob", "firn-shop-catchup")]
    assert deploy["spec"]["replicas"] == 1 and deploy["spec"]["strategy"]["type"] == "Recreate"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    follow = unit_args_in(deb[1], "/etc/firn", "/var/lib/firn", "0.0.0.0:9187")
    for doc in (deploy, cron):
        spec = pod_spec(doc)
        (c,) = spec["containers"]
        want = follow if doc is deploy else [a for a in follow[:follow.index("--metrics-listen")]
                                             if a != "--follow"]
        assert c["args"] == want, (doc["kind"], c["args"])
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
        assert mounts["/etc/firn"]["configMap"]["name"] == config["metadata"]["name"]
        assert mounts["/var/lib/firn"]["persistentVolumeClaim"]["claimName"] == "firn-shop-state"
        for flag in ("--source", "--destination", "--streams"):
            path = Path(c["args"][c["args"].index(flag) + 1])
            assert path.parent == Path("/etc/firn") and path.name in config["data"], path
        assert c["args"][c["args"].index("--state") + 1].startswith("/var/lib/firn/")
        assert [e["secretRef"]["name"] for e in c["envFrom"]] == [secret["metadata"]["name"]]
        env = {e["name"]: e["value"] for e in c["env"]} | secret["stringData"]
        for name in ("source", "destination", "streams"):
            schema = json.loads(subprocess.run([str(firn), "spec", name], capture_output=True,
                                               text=True, check=True).stdout)
            doc_json = expand(json.loads(config["data"][f"{name}.json"]), env)
            errors = [e.message for e in
                      jsonschema.Draft202012Validator(schema).iter_errors(doc_json)]
            assert not errors, f"{name}.json of the ConfigMap: {errors}"
            if name == "destination":
                assert doc_json["index_dir"].startswith("/var/lib/firn/"), doc_json
    (c,) = pod_spec(deploy)["containers"]
    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert port["metrics"] == 9187
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


# ---------------------------------------------------------------------------------------------
# Alert rules and the Grafana dashboard

RULES = REPO / "deploy" / "prometheus" / "firn-alerts.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "firn-alerts.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "firn.json"
# Series Prometheus makes itself, not firn.
PROMETHEUS_SERIES = {"up"}


def promtool() -> str:
    cache = Path(os.environ.get("FIRN_CACHE", Path.home() / ".cache" / "firn")) / "bin"
    tool = shutil.which("promtool") or (str(cache / "promtool")
                                        if (cache / "promtool").is_file() else None)
    assert tool, f"promtool is missing: scripts/setup.sh unpacks it into {cache}"
    return tool


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def rule_exprs() -> dict[str, str]:
    import yaml

    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def metric_names(expr: str) -> set[str]:
    """Metric names of a PromQL expression: identifiers outside label matchers and strings
    that are neither functions, keywords nor label names of by/without/on/ignoring."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", text):
        word = m.group(1)
        if word in ("and", "or", "unless", "bool", "offset", "Inf", "NaN", "e"):
            continue
        names.add(word)
    return names


def deploy_metric_names() -> set[str]:
    names = set()
    for expr in [*rule_exprs().values(), *dashboard_exprs()]:
        found = metric_names(expr)
        assert found, f"no metric in {expr!r}"
        names |= found
    return names - PROMETHEUS_SERIES


def test_metric_name_parser():
    assert metric_names('histogram_quantile(0.99, sum by (job, le) (rate(a_b_bucket{x="y"}[5m])))'
                        ' > 30') == {"a_b_bucket"}
    assert metric_names('x > 0 and y{table=~"$t"} > 900') == {"x", "y"}
    assert metric_names('increase(c_total{result=~"failed|unknown"}[15m]) > 1e9') == {"c_total"}


def test_alert_rules():
    """promtool check rules and promtool test rules (each alert fires where it should and not
    where it should not); every alert has a severity, a summary, a description, a test, and a
    runbook link to a section of docs/operations.md."""
    import yaml

    tool = promtool()
    r = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([tool, "test", "rules", RULE_TESTS.name], capture_output=True,
                       text=True, timeout=120, cwd=RULE_TESTS.parent)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr

    doc = yaml.safe_load(RULES.read_text())
    tests = yaml.safe_load(RULE_TESTS.read_text())
    tested = {t["alertname"] for case in tests["tests"] for t in case["alert_rule_test"]
              if t.get("exp_alerts")}
    ops = (REPO / "docs" / "operations.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", ops, re.M)}
    alerts = [r for g in doc["groups"] for r in g["rules"]]
    assert alerts and all("alert" in r for r in alerts), "only alerting rules expected"
    for rule in alerts:
        name = rule["alert"]
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        ann = rule["annotations"]
        assert ann.get("summary") and ann.get("description"), name
        assert ann["runbook"] == f"docs/operations.md#{name.lower()}", name
        assert name.lower() in anchors, f"docs/operations.md has no section {name}"
        assert name in tested, f"{name} has no firing case in {RULE_TESTS.name}"


def test_grafana_dashboard(tmp_path):
    """The dashboard's structure (unique panel ids, panels that do not overlap, every query on the
    datasource variable, every $variable defined), and its queries parse as PromQL: promtool
    checks them as recording rules, with Grafana's variables replaced by values."""
    import yaml

    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), ids
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['title']!r} overlaps another"
        cells |= mine
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "job", "instance", "table"} <= variables
    for q in [v.get("definition", "") for v in dash["templating"]["list"]] + dashboard_exprs():
        for used in re.findall(r"\$(\w+)", q):
            assert used == "__rate_interval" or used in variables, (used, q)
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("lag", "rows written", "latency", "failures", "bytes written"):
        assert topic in titles, topic

    concrete = [re.sub(r"\$\w+", ".*", e.replace("$__rate_interval", "5m"))
                for e in dashboard_exprs()]
    rules = tmp_path / "dashboard-rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": e} for i, e in enumerate(concrete)]}]}))
    r = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(concrete)} rules found" in r.stdout, r.stdout
