#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what building and testing firn needs on a Debian 12 machine: build tools and -dev
# libraries, PostgreSQL 15, Java 17, a Python virtualenv (outside the clone) for the interop tests,
# the object-storage test servers (scripts/services.sh), and for the Spark interop tests pyspark
# (scripts/requirements-spark.txt) plus the jars listed in scripts/spark-jars.txt (Iceberg Spark
# runtime, SQLite JDBC driver) from Maven Central, and the Apache Iceberg REST catalog fixture jar
# of scripts/rest-jars.txt (the REST catalog tests).
# Idempotent and quick on a second run: apt is skipped when every package is installed, pip
# when the venv's stamps match the sha256 of the requirements files, a jar download when the
# cached jar's sha256 matches.
#
# Environment: FIRN_CACHE (default ~/.cache/firn; the venv is $FIRN_CACHE/venv, the jars are in
#              $FIRN_CACHE/jars), FIRN_PYTHON (interpreter for the venv, default: python3, 3.10
#              or newer), FIRN_SKIP_SPARK=1 (skip pyspark and the jars; the tests marked `spark`
#              then fail, deselect them with -m 'not spark').
# Options:     --demo: only what scripts/demo.sh needs (build tools and libraries, PostgreSQL,
#              the venv with DuckDB and pyiceberg); no Java, object-storage servers or jars.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

APT_PACKAGES=(
    build-essential cmake ninja-build pkg-config clang-format python3-venv
    libpq-dev libcurl4-openssl-dev libssl-dev libjansson-dev libzstd-dev libsnappy-dev
    zlib1g-dev libsqlite3-dev libmicrohttpd-dev liblz4-dev
    # curl and openssl commands: the object-storage test harnesses and the TLS test cluster
    # (tests/harness)
    curl openssl
    # Debian 12 ships the contrib modules inside postgresql-15 (it provides the virtual
    # postgresql-contrib-15); postgresql-contrib is the real package that pulls them in.
    postgresql-15 postgresql-contrib
    # The MySQL/MariaDB source links libmariadb (Connector/C); its tests start a throwaway
    # MariaDB 10.11 (tests/harness/mariadb_cluster.sh). The --demo path keeps the library only.
    libmariadb-dev mariadb-server
    # Spark 3.5 (the Spark interop tests) runs on Java 17.
    openjdk-17-jre-headless
    # systemd-analyze verify/security checks deploy/systemd/firn@.service (tests/interop/
    # test_deploy.py); nothing is started, the package only brings the tool.
    systemd
    # firn serve's browser test (tests/interop/test_serve_ui.py): Debian's chromium, driven by
    # npm playwright-core (install_ui_node) under node
    chromium nodejs
)

DEMO_ONLY=0
case ${1:-} in
--demo) DEMO_ONLY=1 ;;
"") ;;
*) die "unknown option $1 (the only option is --demo)" ;;
esac
if ((DEMO_ONLY)); then
    demo_packages=()
    for pkg in "${APT_PACKAGES[@]}"; do
        [[ $pkg == openjdk-* || $pkg == systemd || $pkg == mariadb-server || $pkg == chromium ||
            $pkg == nodejs ]] || demo_packages+=("$pkg")
    done
    APT_PACKAGES=("${demo_packages[@]}")
fi

CACHE_DIR=${FIRN_CACHE:-$HOME/.cache/firn}
VENV=$CACHE_DIR/venv
REQS=scripts/requirements-test.txt
STAMP=$VENV/.firn-requirements.sha256
SPARK_REQS=scripts/requirements-spark.txt
SPARK_STAMP=$VENV/.firn-requirements-spark.sha256
SPARK_JARS=scripts/spark-jars.txt
REST_JARS=scripts/rest-jars.txt
JAR_DIR=$CACHE_DIR/jars
MAVEN_REPO=https://repo1.maven.org/maven2

as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

install_apt() {
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) != installed ]]; then
            missing+=("$pkg")
        fi
    done
    if ((${#missing[@]} == 0)); then
        say "system packages: all ${#APT_PACKAGES[@]} installed"
        return
    fi
    say "installing system packages: ${missing[*]}"
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    if ! as_root "${apt[@]}" "${missing[@]}"; then
        say "install failed; refreshing package lists and retrying"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        as_root "${apt[@]}" "${missing[@]}"
    fi
}

# Pick an interpreter of at least 3.10 that can make virtualenvs.
pick_python() {
    local cand
    for cand in ${FIRN_PYTHON:-} python3 python3.11 /root/.pyenv/shims/python3.11 /usr/bin/python3; do
        [[ -n $cand ]] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            echo "$cand"
            return
        fi
    done
    die "no python3 (3.10 or newer, with venv) found; set FIRN_PYTHON"
}

install_venv() {
    local want
    want=$(sha256sum "$REQS" | cut -d' ' -f1)
    if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
        if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]]; then
            say "python venv: up to date ($VENV)"
            return
        fi
    else
        local py
        py=$(pick_python)
        say "creating python venv $VENV with $py ($("$py" --version 2>&1))"
        rm -rf "$VENV"
        mkdir -p "$CACHE_DIR"
        "$py" -m venv "$VENV"
    fi
    say "installing python packages from $REQS"
    rm -f "$STAMP"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQS"
    install_duckdb_extensions
    echo "$want" >"$STAMP"
}

# Copy the iceberg and avro extensions from their PyPI packages into DuckDB's default extension
# folder, so a plain `INSTALL iceberg; LOAD iceberg` works without reaching the DuckDB servers.
# Then prove it in a fresh connection that may not auto-install anything.
install_duckdb_extensions() {
    say "installing DuckDB extensions iceberg, avro from their python packages"
    "$VENV/bin/python" - <<'EOF'
import duckdb
from duckdb_extensions import import_extension

con = duckdb.connect()
for name in ("avro", "iceberg"):
    import_extension(name, force_install=True, con=con)
con.close()

con = duckdb.connect(config={"autoinstall_known_extensions": False})
con.sql("INSTALL iceberg; LOAD iceberg; LOAD avro")
rows = con.sql("SELECT extension_name FROM duckdb_extensions() "
               "WHERE loaded AND extension_name IN ('iceberg', 'avro')").fetchall()
assert len(rows) == 2, rows
print(f"setup: duckdb {duckdb.__version__}: iceberg and avro load offline")
EOF
}

install_spark_python() {
    local want
    want=$(sha256sum "$SPARK_REQS" | cut -d' ' -f1)
    if [[ -f $SPARK_STAMP && $(cat "$SPARK_STAMP") == "$want" ]]; then
        say "pyspark: up to date"
        return
    fi
    say "installing python packages from $SPARK_REQS (pyspark is large: a few minutes cold)"
    rm -f "$SPARK_STAMP"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$SPARK_REQS"
    echo "$want" >"$SPARK_STAMP"
}

# fetch_jar COORD SHA256: download group:artifact:version from Maven Central into $JAR_DIR unless
# a jar with that sha256 is already there; the download is checked before it replaces anything.
fetch_jar() {
    local coord=$1 sha=$2 group artifact version url dest tmp
    IFS=: read -r group artifact version <<<"$coord"
    [[ -n $group && -n $artifact && -n $version && ${#sha} -eq 64 ]] ||
        die "bad jar line: $coord $sha"
    dest=$JAR_DIR/$artifact-$version.jar
    if [[ -f $dest && $(sha256sum "$dest" | cut -d' ' -f1) == "$sha" ]]; then
        return 1
    fi
    url=$MAVEN_REPO/${group//.//}/$artifact/$version/$artifact-$version.jar
    say "downloading $url"
    tmp=$(mktemp "$JAR_DIR/.$artifact.XXXXXX")
    if ! curl -fsSL --retry 3 --retry-delay 2 --connect-timeout 30 -o "$tmp" "$url"; then
        rm -f "$tmp"
        die "could not download $url"
    fi
    if [[ $(sha256sum "$tmp" | cut -d' ' -f1) != "$sha" ]]; then
        rm -f "$tmp"
        die "sha256 mismatch for $url (expected $sha)"
    fi
    chmod 0644 "$tmp"
    mv -f "$tmp" "$dest"
}

# install_jars LIST NAME: every jar of LIST (group:artifact:version sha256 lines).
install_jars() {
    local list=$1 name=$2 coord sha rest fetched=0 total=0
    mkdir -p "$JAR_DIR"
    while read -r coord sha rest; do
        [[ -z $coord || $coord == \#* ]] && continue
        total=$((total + 1))
        if fetch_jar "$coord" "$sha"; then
            fetched=$((fetched + 1))
        fi
    done <"$list"
    say "$name jars: $total in $JAR_DIR ($fetched downloaded)"
}

install_spark_jars() {
    install_jars "$SPARK_JARS" spark
}

# promtool (checks deploy/prometheus rules and /metrics in tests/interop/test_deploy.py and
# test_metrics.py) from Debian's prometheus package, unpacked into $CACHE_DIR/bin/promtool:
# installing the package would also install and start a Prometheus server.
install_promtool() {
    local bin=$CACHE_DIR/bin stamp=$CACHE_DIR/bin/.promtool.version want tmp
    want=$(apt-cache policy prometheus 2>/dev/null | sed -n 's/^ *Candidate: //p')
    if [[ -z $want || $want == "(none)" ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        want=$(apt-cache policy prometheus | sed -n 's/^ *Candidate: //p')
    fi
    [[ -n $want && $want != "(none)" ]] || die "no Debian package prometheus to take promtool from"
    if [[ -x $bin/promtool && -f $stamp && $(cat "$stamp") == "$want" ]]; then
        say "promtool: up to date ($want)"
        return
    fi
    say "unpacking promtool from Debian's prometheus $want into $bin"
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -q "prometheus=$want" >/dev/null 2>&1) ||
        die "apt-get download prometheus=$want failed"
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
    mkdir -p "$bin"
    install -m 0755 "$tmp/root/usr/bin/promtool" "$bin/promtool"
    rm -rf "$tmp"
    "$bin/promtool" --version >/dev/null || die "$bin/promtool does not run"
    echo "$want" >"$stamp"
}

# playwright-core (pinned in tests/ui/package.json; no browser download: the test launches
# Debian's /usr/bin/chromium) into $CACHE_DIR/ui-node/node_modules for tests/ui/walk.mjs.
install_ui_node() {
    local dir=$CACHE_DIR/ui-node want have=""
    want=$(sed -n 's/.*"playwright-core": *"\([0-9.]*\)".*/\1/p' tests/ui/package.json)
    [[ -n $want ]] || die "tests/ui/package.json names no playwright-core version"
    if [[ -f $dir/node_modules/playwright-core/package.json ]]; then
        have=$(sed -n 's/^ *"version": *"\([0-9.]*\)".*/\1/p' \
            "$dir/node_modules/playwright-core/package.json" | head -n1)
    fi
    if [[ $have == "$want" ]]; then
        say "playwright-core: up to date ($want in $dir)"
        return
    fi
    if ! command -v npm >/dev/null 2>&1; then
        say "installing npm (Debian's node has it apart)"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm
    fi
    say "installing playwright-core $want into $dir"
    mkdir -p "$dir"
    cp tests/ui/package.json "$dir/package.json"
    (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --omit=dev -q)
    [[ -f $dir/node_modules/playwright-core/package.json ]] || die "playwright-core did not install"
}

install_apt
install_venv
if ((DEMO_ONLY)); then
    say "done (--demo); venv python: $VENV/bin/python"
    echo "$VENV/bin/python"
    exit 0
fi
# Object-storage test services (versitygw, fake-gcs-server), go-installed into $CACHE_DIR/bin.
bash scripts/services.sh
install_promtool
install_ui_node
# The Iceberg REST catalog fixture (a Java 17 jar; tests/harness/rest_catalog.sh).
install_jars "$REST_JARS" "REST catalog"
if [[ ${FIRN_SKIP_SPARK:-} == 1 ]]; then
    say "FIRN_SKIP_SPARK=1: not installing pyspark and the Spark jars"
else
    install_spark_python
    install_spark_jars
fi
say "done; venv python: $VENV/bin/python"
echo "$VENV/bin/python"
