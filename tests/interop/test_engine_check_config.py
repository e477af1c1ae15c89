# SPDX-License-Identifier: Apache-2.0
"""Configuration mistakes that `firn check` used to pass and `firn sync` then failed on: each is
found by `check` (given the streams file) and by `sync` before anything is written, as one
`firn:` line naming the stream or key and what to do, exit code 2 (README "Exit codes")."""

from __future__ import annotations

import json

import pytest

from firnutil import FirnEnv


def one_error(proc, code: int) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, expected {code}:\n{proc.stderr}"
    assert len(lines) == 1 and lines[0].startswith("firn: "), f"not one line:\n{proc.stderr}"
    return lines[0]


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text, f double precision, "
                     "ts timestamptz, d date, j json); INSERT INTO t VALUES (1, 'a', 1.5, now(), "
                     "current_date, '{}')")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.setup(pg, ["t"])
    return env


def check_and_sync(fe: FirnEnv) -> list[str]:
    """Runs check (all three files) and sync; both must fail with exit 2 and one line, and
    nothing may be written. Returns both lines."""
    lines = []
    for cmd in (["check", "--source", str(fe.source), "--destination", str(fe.destination),
                 "--streams", str(fe.streams)], ["sync", *fe.sync_args]):
        lines.append(one_error(fe.run(*cmd, "--log", "error", timeout=60), 2))
    assert not fe.catalog_db.exists() or not fe.catalog().list_namespaces(), "a table was created"
    return lines


@pytest.mark.parametrize("opts, want", [
    ({"partition": ["day(v)"]}, ['stream "public.t"', '"day(v)"', '"v"', "string"]),
    ({"partition": ["bucket(4, f)"]}, ['stream "public.t"', '"bucket(4, f)"', '"f"', "double"]),
    ({"partition": ["hour(d)"]}, ['stream "public.t"', '"hour(d)"', '"d"', "date"]),
    ({"partition": ["truncate(2, ts)"]}, ['stream "public.t"', '"truncate(2, ts)"']),
    ({"sync_mode": "incremental", "cursor_field": "nope"},
     ['stream "public.t"', 'cursor_field "nope"', "does not exist", "available_cursor_fields"]),
    ({"sync_mode": "incremental", "cursor_field": "ts:gone"},
     ['stream "public.t"', '"gone"', "does not exist"]),
    ({"sync_mode": "incremental", "cursor_field": "j"},
     ['stream "public.t"', 'cursor_field "j"', "json", "no order"]),
    ({"target_table": ""}, ['"target_table"', "empty"]),
])
def test_stream_mistakes(fe, opts, want):
    fe.write_streams([("t", opts)])
    for line in check_and_sync(fe):
        for w in want:
            assert w in line, (w, line)


def test_empty_namespace(fe):
    fe.write_destination(namespace="")
    for line in check_and_sync(fe):
        assert '"namespace"' in line and "empty" in line, line


def test_empty_slot(fe, pg):
    fe.write_source(pg, slot="")
    for line in check_and_sync(fe):
        assert '"slot"' in line, line


@pytest.mark.parametrize("extra, key", [({"sslmode": "sometimes"}, '"sslmode"'),
                                        ({"port": "abc"}, '"port"'),
                                        ({"params": {"sslmode": "bogus"}}, "sslmode"),
                                        ({"params": {"keepalives": "abc"}}, '"keepalives"'),
                                        ({"params": {"nosuch": "1"}}, '"nosuch"')])
def test_bad_connection_parameters(fe, pg, extra, key):
    """Connection parameters libpq refuses are configuration errors (exit 2), not source errors:
    found at load, or when libpq validates them."""
    fe.write_source(pg, **extra)
    for line in check_and_sync(fe):
        assert key in line, line
    line = one_error(fe.run("check", "--source", str(fe.source), "--log", "error"), 2)
    assert key in line, line
