# SPDX-License-Identifier: Apache-2.0
"""The firn command line: --help on every command, usage errors, configuration mistakes (one line
naming the file and the key, exit code 2), secrets kept out of the output, and `firn spec`
validating the fixture files with an independent JSON Schema validator (jsonschema)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "config"
COMMANDS = ["spec", "check", "discover", "sync", "status", "maintain", "version", "help"]
ENV = {
    "FIRN_TEST_PG_PASSWORD": "pg-secret-123",
    "FIRN_TEST_S3_SECRET": "s3-secret-456",
    "FIRN_TEST_TOKEN": "token-secret-789",
}


def run(firn_bin: Path, *args: str, env: dict | None = None, cwd: Path | None = None):
    full_env = dict(os.environ)
    full_env.pop("FIRN_LOG", None)
    full_env.update(ENV)
    full_env.update(env or {})
    return subprocess.run([str(firn_bin), *args], capture_output=True, text=True, timeout=60,
                          env=full_env, cwd=cwd)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got {lines!r}"
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_on_every_command(firn_bin, command):
    for flag in ("--help", "-h"):
        proc = run(firn_bin, command, flag)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"usage: firn {command}")
        assert proc.stderr == ""


def test_top_level_help_lists_commands_and_exit_codes(firn_bin):
    proc = run(firn_bin, "help")
    assert proc.returncode == 0
    for command in COMMANDS:
        assert f"\n  {command} " in proc.stdout
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "130 "):
        assert f"\n  {code}" in proc.stdout
    assert run(firn_bin, "help", "sync").stdout.startswith("usage: firn sync")
    proc = run(firn_bin)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: firn")


def test_version(firn_bin):
    proc = run(firn_bin, "version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("firn version ")


@pytest.mark.parametrize("args, message", [
    (["frobnicate"], 'firn: unknown command "frobnicate"; run "firn help" for the list'),
    (["sync", "--bogus"], 'firn: sync: unknown option "--bogus"; run "firn sync --help"'),
    (["sync", "--source"], 'firn: sync: option "--source" needs a value; run "firn sync --help"'),
    (["sync", "--source", "a.json"],
     'firn: sync: missing --destination FILE; run "firn sync --help"'),
    (["check"], 'firn: check: give --source FILE, --destination FILE or both; '
                'run "firn check --help"'),
    (["discover"], 'firn: discover: missing --source FILE; run "firn discover --help"'),
    (["status"], 'firn: status: missing --streams FILE; run "firn status --help"'),
    (["spec", "nope"], 'firn: spec: unknown file "nope"; expected source, destination, streams '
                       'or state; run "firn spec --help"'),
    (["spec", "source", "extra"], 'firn: spec: unexpected argument "extra"; run "firn spec --help"'),
    (["check", "--follow"], 'firn: check: unknown option "--follow"; run "firn check --help"'),
    (["sync", "--source=a", "--source=b"],
     'firn: sync: option "--source" given twice; run "firn sync --help"'),
    (["check", "--source", "x", "--log-format", "xml"],
     'firn: check: --log-format must be "logfmt" or "json", got "xml"; run "firn check --help"'),
])
def test_usage_errors_exit_2_with_one_line(firn_bin, args, message):
    proc = run(firn_bin, *args)
    assert proc.returncode == 2
    assert one_line(proc.stderr) == message
    assert proc.stdout == ""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_missing_file(firn_bin, tmp_path):
    missing = tmp_path / "source.json"
    proc = run(firn_bin, "check", "--source", str(missing))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == f'firn: cannot open "{missing}": No such file or directory'


def test_bad_json_names_file_line_and_column(firn_bin, tmp_path):
    path = write(tmp_path, "source.json", '{\n  "host": "h",\n  "port": 5432,\n}\n')
    proc = run(firn_bin, "check", "--config", str(path))
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert line.startswith(f"firn: {path}:4:")
    assert "invalid JSON" in line


def test_unknown_key_names_file_and_path(firn_bin, tmp_path):
    path = write(tmp_path, "destination.json",
                 json.dumps({"type": "ICEBERG", "writer": {"catlog_type": "rest"}}))
    proc = run(firn_bin, "check", "--destination", str(path))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (f'firn: {path}: unknown key "writer.catlog_type" '
                                     '(did you mean "catalog_type"?)')


def test_bad_value_and_unset_variable(firn_bin, tmp_path):
    path = write(tmp_path, "source.json", json.dumps({"host": "h", "port": 99999}))
    proc = run(firn_bin, "check", "--source", str(path))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (f'firn: {path}: "port" must be between 1 and 65535, '
                                     'got 99999')
    path = write(tmp_path, "source.json", json.dumps(
        {"host": "h", "database": "d", "username": "u", "password": "${FIRN_NOT_SET_ANYWHERE}"}))
    proc = run(firn_bin, "check", "--source", str(path))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (f'firn: {path}: "password": environment variable '
                                     '"FIRN_NOT_SET_ANYWHERE" is not set')


def test_streams_mistake_in_sync(firn_bin, tmp_path):
    streams = write(tmp_path, "streams.json", json.dumps(
        {"selected_streams": {"public": [{"stream_name": "t", "sync_mode": "incremental"}]}}))
    proc = run(firn_bin, "sync", "--source", str(DATA / "firn_source.json"), "--destination",
               str(DATA / "firn_destination.json"), "--streams", str(streams))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (f'firn: {streams}: stream "public.t": sync mode '
                                     '"incremental" needs "cursor_field"')


def test_state_folder_missing_is_refused_up_front(firn_bin, tmp_path):
    """A state file that does not exist yet is fine, a folder that does not exist is not: it is
    refused before anything is copied, not after the first commit."""
    state = tmp_path / "nowhere" / "state.json"
    proc = run(firn_bin, "sync", "--source", str(DATA / "firn_source.json"), "--destination",
               str(DATA / "firn_destination.json"), "--streams",
               str(DATA / "firn_streams.json"), "--state", str(state))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (f'firn: state file "{state}": folder "{state.parent}" does '
                                     'not exist; create it or pass another --state')


def test_secrets_never_printed(firn_bin, tmp_path):
    # A file with a mistake next to secrets, given inline and through the environment.
    path = write(tmp_path, "destination.json", json.dumps({"writer": {
        "catalog_type": "rest", "rest_catalog_url": "ftp://nope", "token": "${FIRN_TEST_TOKEN}",
        "aws_secret_key": "inline-secret-value", "iceberg_s3_path": "s3://w"}}))
    proc = run(firn_bin, "check", "--destination", str(path), "--log", "trace")
    assert proc.returncode == 2
    output = proc.stdout + proc.stderr
    for secret in ("token-secret-789", "inline-secret-value"):
        assert secret not in output
    assert one_line(proc.stderr) == (f'firn: {path}: "writer.rest_catalog_url" must be an '
                                     'http:// or https:// URL')


def test_good_files_reach_the_engine(firn_bin, tmp_path):
    """Valid OLake and firn files load; the command then fails only in the engine."""
    for prefix in ("olake", "firn"):
        # copies: sync writes its state and stats files next to the state file
        files = {}
        for kind in ("source", "destination", "streams", "state"):
            files[kind] = tmp_path / prefix / f"{kind}.json"
            files[kind].parent.mkdir(exist_ok=True)
            files[kind].write_bytes((DATA / f"{prefix}_{kind}.json").read_bytes())
        proc = run(firn_bin, "sync", *(a for k, p in files.items() for a in (f"--{k}", str(p))),
                   "--log", "error")
        assert proc.returncode in (0, 1, 3, 4), proc.stderr
        assert "pg-secret-123" not in proc.stdout + proc.stderr
        if proc.returncode == 1:
            assert one_line(proc.stderr) == "firn: the sync engine is not built yet"


def test_olake_warnings_are_logged(firn_bin):
    proc = run(firn_bin, "check", "--source", str(DATA / "olake_source.json"), "--log", "warn")
    assert '\\"retry_count\\" is accepted for OLake compatibility' in proc.stderr \
        or '"retry_count" is accepted for OLake compatibility' in proc.stderr


def test_spec_validates_fixture_files(firn_bin):
    jsonschema = pytest.importorskip("jsonschema")
    proc = run(firn_bin, "spec")
    assert proc.returncode == 0
    schemas = json.loads(proc.stdout)
    assert set(schemas) == {"source", "destination", "streams", "state"}
    for kind, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        for prefix in ("olake", "firn"):
            document = json.loads((DATA / f"{prefix}_{kind}.json").read_text())
            errors = list(validator.iter_errors(document))
            assert not errors, f"{prefix}_{kind}.json: {errors[0].message}"
        # the schema rejects what firn rejects: an unknown key, a bad enum value
        assert list(validator.iter_errors({"no_such_key": 1}))
    bad_source = {"host": "h", "ssl": {"mode": "requir"}}
    assert list(jsonschema.Draft202012Validator(schemas["source"]).iter_errors(bad_source))
    single = json.loads(run(firn_bin, "spec", "destination").stdout)
    assert single == schemas["destination"]


def test_biglake_refuses_dotted_namespaces_before_anything(firn_bin, tmp_path):
    """BigLake takes single-level namespaces only (issue 26): a dotted destination namespace or
    a stream's dotted target_namespace is a configuration error naming the rule, before any
    connection (the catalog URI here is not even reachable)."""
    dest = {"catalog": {"type": "rest", "uri": "https://biglake.googleapis.com/iceberg/v1/"
                        "restcatalog", "warehouse": "gs://b/w", "token": "t"},
            "namespace": "lake.{schema}"}
    d = write(tmp_path, "destination.json", json.dumps(dest))
    proc = run(firn_bin, "check", "--destination", str(d))
    assert proc.returncode == 2, proc.stderr
    assert "BigLake takes single-level namespaces only" in one_line(proc.stderr)
    assert '"namespace" "lake.{schema}"' in proc.stderr
    # the bl:// warehouse form is BigLake too; a stream's own dotted target_namespace
    dest["catalog"] = {"type": "rest", "uri": "https://catalog.example/iceberg",
                       "warehouse": "bl://projects/p/catalogs/c", "token": "t"}
    dest["namespace"] = "{database}_{schema}"
    d = write(tmp_path, "destination.json", json.dumps(dest))
    streams = write(tmp_path, "streams.json", json.dumps(
        {"selected_streams": {"public": [{"stream_name": "t", "target_namespace": "a.b"}]}}))
    proc = run(firn_bin, "sync", "--source", str(DATA / "firn_source.json"), "--destination",
               str(d), "--streams", str(streams))
    assert proc.returncode == 2, proc.stderr
    assert 'stream "public.t": target namespace "a.b" has a dot' in one_line(proc.stderr)
    # elsewhere a dotted namespace is a nested namespace, and fine
    dest["catalog"] = {"type": "rest", "uri": "http://127.0.0.1:9/iceberg", "token": "t"}
    dest["namespace"] = "lake.{schema}"
    d = write(tmp_path, "destination.json", json.dumps(dest))
    proc = run(firn_bin, "check", "--destination", str(d))
    assert "single-level" not in proc.stderr and proc.returncode != 2, proc.stderr
