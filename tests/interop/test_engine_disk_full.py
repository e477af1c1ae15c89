# SPDX-License-Identifier: Apache-2.0
"""A warehouse on a full or read-only disk (a small tmpfs; skipped where mounting is not allowed):
a catch-up `firn sync` that must write a data file there stops with one line naming the file and
the system's reason and exit code 4 (README "Exit codes": destination), also when the write
happens in the CDC phase, and nothing is lost: once the disk has room again the next run leaves
the table equal to the source, value by value."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from firnutil import FirnEnv, META_COLUMNS, arrow_rows, diff_rows, source_rows


def mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def tiny(tmp_path):
    point = tmp_path / "disk"
    point.mkdir()
    proc = mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point))
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path, tiny) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.warehouse = tiny / "warehouse"
    env.setup(pg, ["t"])
    return env


def one_error(proc, code: int) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, expected {code}:\n{proc.stderr}"
    assert len(lines) == 1 and lines[0].startswith("firn: "), f"not one line:\n{proc.stderr}"
    return lines[0]


def assert_equal_to_source(fe: FirnEnv, pg):
    tbl = fe.catalog().load_table("e2e.t")
    names = [f.name for f in tbl.schema().fields if f.name not in META_COLUMNS]
    with pg.connect(dbname=fe.dbname) as conn:
        expected = source_rows(conn, "t", tbl.schema(), names)
    diff = diff_rows(expected, arrow_rows(tbl.scan().to_arrow(), names), 0, names)
    assert not diff, diff


def test_read_only_then_full_warehouse(fe, pg, tiny):
    fe.sync("--log", "error")
    data = tiny / "warehouse" / "e2e" / "t" / "data"
    # read-only: the CDC flush cannot create its data file
    with pg.connect(dbname=fe.dbname) as conn:
        conn.execute("UPDATE t SET v = 'ro' WHERE id <= 10")
    assert mount("-o", "remount,ro", str(tiny)).returncode == 0
    try:
        line = one_error(fe.sync("--log", "error", check=False), 4)
    finally:
        assert mount("-o", "remount,rw", str(tiny)).returncode == 0
    assert line.startswith(f'firn: could not create file "{data}/.'), line
    assert line.endswith(": Read-only file system"), line
    # full: a filler leaves no room for the next data file
    with pg.connect(dbname=fe.dbname) as conn:
        conn.execute("UPDATE t SET v = repeat(md5(id::text), 30) WHERE id % 2 = 0")
    filler = tiny / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k", "count=64"],
                   capture_output=True)
    line = one_error(fe.sync("--log", "error", check=False), 4)
    assert line.startswith(f'firn: could not write file "{data}/.'), line
    assert line.endswith(": No space left on device"), line
    assert not [p.name for p in data.iterdir() if p.name.startswith(".")], "temporary files left"
    filler.unlink()
    fe.sync("--log", "error")
    assert_equal_to_source(fe, pg)


def test_full_catalog_disk(fe, pg, tiny, tmp_path):
    """trial13: the SQL catalog's file on a full disk (the warehouse elsewhere) exited 3, as if
    the source had failed: SQLite's "database or disk is full" carried no errno. It is a
    destination error (4) naming the catalog file, and the next run, with room again, leaves
    the table equal to the source."""
    catalog = fe.catalog_db = tiny / "catalog.db"
    fe.warehouse = tmp_path / "warehouse"
    fe.write_destination(catalog={"type": "sql", "uri": str(catalog),
                                  "warehouse": str(fe.warehouse)})
    fe.sync("--log", "error")
    with pg.connect(dbname=fe.dbname) as conn:
        conn.execute("INSERT INTO t SELECT g, repeat(md5(g::text), 4) FROM generate_series(1001, "
                     "3000) g; UPDATE t SET v = 'full' WHERE id <= 10")
    filler = tiny / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k", "count=1000"],
                   capture_output=True)
    line = one_error(fe.sync("--log", "error", check=False), 4)
    assert line.startswith(f'firn: could not write in the SQL catalog "{catalog}": No space left '
                           "on device"), line
    filler.unlink()
    fe.sync("--log", "error")
    assert_equal_to_source(fe, pg)
