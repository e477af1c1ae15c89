# SPDX-License-Identifier: Apache-2.0
"""Configuration and environment mistakes (issue 7, check 3): each gives one line on stderr
starting with "firn:" and the exit code of README "Exit codes" (2 configuration, 3 source,
4 destination), from `firn check` and from `firn sync`, and no password ever appears in the
output. The file mistakes test_cli_config.py covers for `check` (missing source file, bad JSON
in a source, unknown destination key) are extended here to the other files and to `sync`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import PG_CLUSTER, PW_ROLE, PW_SECRET, PgCluster, _parse_exports
from firnutil import FirnEnv, wait_for

PASSWORD_ENV = "FIRN_TEST_E2E_PASSWORD"


def run(fe: FirnEnv, *args: str, password: str | None = None, timeout: float = 60):
    env = {PASSWORD_ENV: password} if password is not None else {}
    return fe.run(*args, "--log", "error", timeout=timeout, env=env)


def one_error(proc, code: int, *secrets: str) -> str:
    """Asserts exit code `code` and a single `firn:` line on stderr; returns it."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, expected {code}:\n{proc.stderr}"
    assert len(lines) == 1 and lines[0].startswith("firn: "), f"not one line:\n{proc.stderr}"
    for s in secrets:
        assert s not in proc.stdout + proc.stderr, f"secret {s!r} printed"
    return lines[0]


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.setup(pg, ["t"])
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- files ----------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["destination", "streams"])
def test_missing_file_in_sync(fe, which):
    path = getattr(fe, which)
    path.unlink()
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert line == f'firn: cannot open "{path}": No such file or directory'


@pytest.mark.parametrize("which", ["destination", "streams", "state"])
def test_bad_json_in_each_file(fe, which):
    path = getattr(fe, which)
    path.write_text('{"a": 1,,}')
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert line.startswith(f"firn: {path}:1:") and "invalid JSON" in line


@pytest.mark.parametrize("which, doc, key", [
    ("source", {"host": "h", "database": "d", "username": "u", "slots": "x"}, "slots"),
    ("streams", {"selected_streams": {"public": [{"stream_name": "t", "sync_mod": "cdc"}]}},
     "selected_streams.public[0].sync_mod"),
])
def test_unknown_key_in_other_files(fe, which, doc, key):
    path = getattr(fe, which)
    path.write_text(json.dumps(doc))
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert line.startswith(f'firn: {path}: unknown key "{key}"'), line


def test_selected_table_missing_from_source(fe):
    """Never synced: a misspelt name, a configuration error (test_engine_missing_table.py has the
    stream synced before, a stopped stream with exit 3)."""
    fe.write_streams(["t", "no_such_table"])
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert '"public.no_such_table"' in line and "never synced" in line, line


# ---- the source ----------------------------------------------------------------------------

def test_wrong_password(fe, pg):
    fe.write_source(pg, username=PW_ROLE, password="${%s}" % PASSWORD_ENV)
    for args in (["check", "--source", str(fe.source)], ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args, password="not-the-secret-42"), 3, "not-the-secret-42",
                         PW_SECRET)
        assert "password authentication failed" in line, line
    # the right password works, and is not printed either
    proc = run(fe, "check", "--source", str(fe.source), password=PW_SECRET)
    assert proc.returncode == 0, proc.stderr
    assert PW_SECRET not in proc.stdout + proc.stderr


def test_unreachable_host(fe, pg):
    fe.write_source(pg, port=free_port(), password="closed-port-secret",
                    connect_timeout_seconds=2)
    for args in (["check", "--source", str(fe.source)], ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 3, "closed-port-secret")
        assert "refused" in line or "could not connect" in line, line


def test_missing_slot(fe, pg):
    fe.write_source(pg, slot="no_such_slot", create_slot=False)
    for args in (["check", "--source", str(fe.source), "--streams", str(fe.streams)],
                 ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 3)
        assert ('replication slot "no_such_slot" does not exist; create it with SELECT '
                "pg_create_logical_replication_slot('no_such_slot', 'pgoutput')") in line, line


def nothing_left(fe: FirnEnv, conn) -> None:
    """A failed first run left no Iceberg table or namespace and no publication (issue 24
    item 10)."""
    assert not fe.catalog_db.exists() or not fe.catalog().list_namespaces(), \
        fe.catalog().list_namespaces()
    pubs = conn.execute("SELECT pubname FROM pg_publication").fetchall()
    assert pubs == [], pubs


def test_failed_first_sync_leaves_nothing(fe, pg, pg_db):
    """A first `firn sync` that stops at a check (a missing slot firn may not create; a table
    CDC cannot carry) drops again the table, namespace and publication it created before the
    check failed, and the run after the fix starts from scratch and syncs."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE u (id int PRIMARY KEY, v text); INSERT INTO u VALUES (7, 'u')")
        fe.write_streams(["t", "u"])
        fe.write_source(pg, slot="no_such_slot", create_slot=False)
        line = one_error(run(fe, "sync", *fe.sync_args), 3)
        assert 'replication slot "no_such_slot" does not exist' in line, line
        nothing_left(fe, conn)
        conn.execute("CREATE TABLE nokey (a int, b text)")
        fe.write_source(pg)
        fe.write_streams(["t", "u", "nokey"])
        line = one_error(run(fe, "sync", *fe.sync_args), 3)
        assert 'table "public"."nokey" has no primary key or replica identity' in line, line
        nothing_left(fe, conn)
        assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0] == 0
        fe.write_streams(["t", "u"])
        fe.sync()
        rows = fe.pyiceberg_arrow("u").select(["id", "v"]).to_pylist()
        assert rows == [{"id": 7, "v": "u"}], rows


def test_user_slot_dropped_after_sync(fe, pg, pg_db):
    """A slot the user manages (create_slot false) dropped after the table got changes from it:
    "create it" is not the remedy (a new slot resumes after a gap, silently); the line names
    the table and create_slot, which copies the table again."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot('user_slot', 'pgoutput')")
    fe.write_source(pg, slot="user_slot", create_slot=False)
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("INSERT INTO t VALUES (2, 'b')")
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("SELECT pg_drop_replication_slot('user_slot')")
        conn.execute("INSERT INTO t VALUES (3, 'c')")
    line = one_error(run(fe, "sync", *fe.sync_args), 3)
    assert ('replication slot "user_slot" does not exist, but table "e2e.t" holds changes up '
            "to ") in line and '"create_slot": true' in line, line
    fe.write_source(pg, slot="user_slot", create_slot=True)
    fe.sync()
    rows = fe.pyiceberg_arrow("t").select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "b"), (3, "c")], rows


def test_synced_table_left_publication(fe, pg, pg_db):
    """A synced table taken out of the publication: its changes from then on are not in the
    slot, so "add it back" alone would resume after a silent gap; the line says to copy it again,
    and doing so leaves the table equal to the source."""
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("INSERT INTO t VALUES (2, 'b')")
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("ALTER PUBLICATION firn_e2e DROP TABLE t")
        conn.execute("INSERT INTO t VALUES (3, 'c')")
    line = one_error(run(fe, "sync", *fe.sync_args), 3)
    assert 'table "public"."t" left publication "firn_e2e"' in line, line
    assert 'drop table "e2e.t" and run firn sync to copy it again' in line, line
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("ALTER PUBLICATION firn_e2e ADD TABLE t")
    fe.catalog().drop_table("e2e.t")
    fe.sync()
    rows = fe.pyiceberg_arrow("t").select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "b"), (3, "c")], rows


def test_missing_publication(fe, pg):
    fe.write_source(pg, publication="no_such_pub", create_publication=False)
    for args in (["check", "--source", str(fe.source), "--streams", str(fe.streams)],
                 ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 3)
        assert 'publication "no_such_pub" does not exist' in line, line


def test_publication_missing_a_table(fe, pg, pg_db):
    """A publication of the user's that does not carry a selected table: `check` says which and
    what to run, before any sync."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE other (id int PRIMARY KEY); CREATE PUBLICATION only_other "
                     "FOR TABLE other")
    fe.write_source(pg, publication="only_other", create_publication=False)
    line = one_error(run(fe, "check", "--source", str(fe.source), "--streams", str(fe.streams)),
                     3)
    assert line.endswith('publication "only_other" does not cover table "public.t"; run ALTER '
                         'PUBLICATION "only_other" ADD TABLE "public"."t"'), line


def test_publication_needs_table_owner(fe, pg, pg_db):
    """CREATE PUBLICATION ... FOR TABLE needs the tables' owner: a role with REPLICATION, SELECT
    and CREATE on the database is told so by `check` and by `sync`, with the remedy."""
    role = "firn_nonowner_" + uuid.uuid4().hex[:6]
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN REPLICATION")
        conn.execute(f"GRANT SELECT ON t TO {role}")
        conn.execute(f'GRANT CREATE ON DATABASE "{pg_db}" TO {role}')
    fe.write_source(pg, username=role)
    line = one_error(run(fe, "check", "--source", str(fe.source), "--streams", str(fe.streams)), 3)
    assert "cannot create it" in line and "public.t" in line, line
    line = one_error(run(fe, "sync", *fe.sync_args), 3)
    assert "could not create publication" in line and "must be owner of table t" in line, line
    assert line.endswith('CREATE PUBLICATION "firn_e2e" FOR TABLE "public"."t" '
                         "WITH (publish_via_partition_root = true)"), line
    with pg.connect(dbname=pg_db) as conn:  # nothing was published, no slot was made
        assert conn.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s",
                            (pg_db,)).fetchone()[0] == 0


@pytest.fixture(scope="module")
def replica_cluster():
    """A second cluster with wal_level = replica (pg_cluster.sh FIRN_PG_WAL_LEVEL)."""
    handle = Path(tempfile.mkdtemp(prefix="firn-pytest-replica.")) / "cluster"
    env = dict(os.environ, FIRN_PG_WAL_LEVEL="replica")
    proc = subprocess.run(["bash", str(PG_CLUSTER), "start", str(handle)], capture_output=True,
                          text=True, timeout=120, env=env)
    try:
        assert proc.returncode == 0, proc.stderr
        e = _parse_exports(proc.stdout)
        yield PgCluster(host=e["PGHOST"], port=int(e["PGPORT"]), user=e["PGUSER"],
                        dbname=e["PGDATABASE"])
    finally:
        subprocess.run(["bash", str(PG_CLUSTER), "stop", str(handle)], timeout=60)
        shutil.rmtree(handle.parent, ignore_errors=True)


def test_wal_level_not_logical(replica_cluster, firn_bin, tmp_path):
    pg = replica_cluster
    with pg.connect() as conn:
        assert conn.execute("SHOW wal_level").fetchone()[0] == "replica"
        conn.execute("CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY)")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg.dbname)
    fe.setup(pg, ["t"])
    for args in (["check", "--source", str(fe.source), "--streams", str(fe.streams)],
                 ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 3)
        assert "wal_level" in line and "logical" in line, line


# ---- the destination ------------------------------------------------------------------------

def test_catalog_path_not_writable(fe):
    # We run as root, so permissions do not stop us: a path below a regular file fails for root.
    bad = "/dev/null/firn"
    fe.write_destination(catalog={"type": "sql", "uri": f"sqlite:///{bad}/catalog.db",
                                  "warehouse": f"file://{fe.warehouse}"})
    for args in (["check", "--destination", str(fe.destination)], ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 4)
        assert bad in line, line


def test_warehouse_not_writable(fe):
    fe.write_destination(catalog={"type": "sql", "uri": f"sqlite:///{fe.catalog_db}",
                                  "warehouse": "file:///dev/null/warehouse"})
    for args in (["check", "--destination", str(fe.destination)], ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 4)
        assert "/dev/null/warehouse" in line, line


def test_catalog_file_mistakes(fe):
    """trial13: a warehouse that is a file, a catalog.uri that is a folder, a file that is not a
    SQLite database and a damaged catalog each say what is wrong and what to do (they said
    "unable to open database file", "file is not a database" or "database disk image is
    malformed", with the path twice), exit 4, and leave the file as it was."""
    not_db = fe.root / "notes.txt"
    not_db.write_text("not a database\n" * 400)
    fe.sync()
    damaged = fe.root / "damaged.db"
    damaged.write_bytes(fe.catalog_db.read_bytes()[:5000])
    cases = [
        ({"warehouse": str(not_db)},
         f'cannot open SQL catalog database "{not_db}/firn_catalog.db": "{not_db}" is a file, '
         'not a folder; point "catalog.warehouse" (or "catalog.uri") at a folder'),
        ({"warehouse": str(fe.warehouse), "uri": str(fe.root)},
         f'cannot open SQL catalog database "{fe.root}": it is a folder; point "catalog.uri" at '
         "a file"),
        ({"warehouse": str(fe.warehouse), "uri": str(not_db)},
         f'cannot use "{not_db}" as the SQL catalog: it is not a SQLite database; point '
         '"catalog.uri" at firn\'s catalog file or at a new path'),
        ({"warehouse": str(fe.warehouse), "uri": str(damaged)},
         f'cannot use SQL catalog database "{damaged}": it is damaged (database disk image is '
         "malformed); restore it from a backup"),
    ]
    for catalog, want in cases:
        fe.write_destination(catalog={"type": "sql", **catalog})
        for args in (["check", "--destination", str(fe.destination)], ["sync", *fe.sync_args]):
            assert one_error(run(fe, *args), 4) == f"firn: {want}"
    assert not_db.read_text() == "not a database\n" * 400


def test_index_dir_not_writable(fe):
    """A bad index_dir is a configuration error found by check and before a sync copies."""
    fe.write_destination(index_dir="/dev/null/index")
    for args in (["check", "--destination", str(fe.destination)], ["sync", *fe.sync_args]):
        line = one_error(run(fe, *args), 2)
        assert line == ('firn: "index_dir": could not create folder "/dev/null/index": Not a '
                        'directory; point it at a writable local folder (or leave it out for '
                        '~/.cache/firn)'), line
    assert not fe.warehouse.exists() or not list(fe.warehouse.iterdir())
    fe.write_destination(index_dir="")
    line = one_error(run(fe, "check", "--destination", str(fe.destination)), 2)
    assert line.endswith('"index_dir" must not be empty (leave it out for the default, '
                         '~/.cache/firn)'), line


def test_state_lock_names_a_live_holder(fe):
    """Two runs started at once: the loser may read the lock file before the winner wrote its
    pid, while it still names the run before (dead). A dead pid is never named."""
    import fcntl

    lock = Path(f"{fe.state}.lock")
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write("999999999\n")  # above pid_max: no such process
        f.flush()
        line = one_error(run(fe, "sync", *fe.sync_args), 1)
        assert "is in use by another firn sync (pid unknown)" in line, line
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        line = one_error(run(fe, "sync", *fe.sync_args), 1)
        assert f"is in use by another firn sync (pid {os.getpid()})" in line, line


def test_slot_in_use_by_another_firn(fe):
    first = fe.start_follow()
    try:
        wait_for(lambda: b"replication connection open" in (fe.root / "follow.log").read_bytes()
                 and first.poll() is None, 60, what="the first firn to stream")
        time.sleep(1)
        # the same state file: refused before anything is opened, naming the first run
        line = one_error(run(fe, "sync", *fe.sync_args), 1)
        assert line == (f'firn: state file "{fe.state}" is in use by another firn sync (pid '
                        f'{first.pid}); stop that one first, or give this run its own --state'), line
        # another state file on the same slot: the slot is busy
        args = list(fe.sync_args)
        args[args.index("--state") + 1] = str(fe.root / "other-state.json")
        line = one_error(run(fe, "sync", *args), 3)
        assert "firn_e2e" in line and "active" in line, line
        # ... found before any table is opened (no key index is loaded or rebuilt), also with
        # another index folder
        proc = fe.run("sync", *args, "--log", "info", timeout=60,
                      env={"XDG_CACHE_HOME": str(fe.root / "other-cache")})
        assert proc.returncode == 3, proc.stderr
        assert 'replication slot "firn_e2e" is in use by another firn sync' in proc.stderr
        assert "index" not in proc.stderr and "table" not in proc.stderr, proc.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0


def test_slot_locked_while_another_firn_copies(fe, pg, pg_db):
    """A run's lock on its slot (docs/operations.md) also covers the initial copy, when the slot
    is not active yet: a second run stops before it opens a table, naming the holder."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("SELECT pg_advisory_lock(1718186606, hashtext('firn slot firn_e2e'))")
        line = one_error(run(fe, "sync", *fe.sync_args), 3)
        assert line.startswith('firn: replication slot "firn_e2e" is in use by another firn '
                               f'sync (server process {conn.info.backend_pid} holds it'), line
        assert not fe.catalog_db.exists() or not fe.catalog().list_namespaces()
    fe.sync(timeout=120)  # the lock went with the connection


def test_slot_of_another_destination_is_not_dropped(fe, pg, pg_db, tmp_path):
    """Two destinations from one database under the same slot name (the default firn_<database>
    of two source files): the second one's first run must not drop or read the first one's slot,
    whose unread changes it would lose; it stops naming the slot and both remedies, and the first
    destination still gets every change."""
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("INSERT INTO t VALUES (2, 'b'); UPDATE t SET v = 'a2' WHERE id = 1")
    other = FirnEnv(fe.firn_bin, tmp_path / "other", pg_db)
    other.setup(pg, ["t"])
    line = one_error(run(other, "sync", *other.sync_args), 3)
    assert line == ('firn: replication slot "firn_e2e" already exists, but this destination has '
                    "no table synced from it (another destination or consumer may read it): give "
                    'this destination its own "slot" in the source file, or drop the slot with '
                    "SELECT pg_drop_replication_slot('firn_e2e') if nothing uses it"), line
    # the stopped run left no table behind (it would make the next run take the slot for its own)
    assert not other.catalog().list_namespaces(), other.catalog().list_namespaces()
    fe.sync()
    rows = fe.pyiceberg_arrow("t").select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a2"), (2, "b")], rows
    # its own slot works at once
    other.write_source(pg, slot="firn_other")
    other.sync()
    rows = other.pyiceberg_arrow("t").select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a2"), (2, "b")], rows


def test_role_without_replication(fe, pg, pg_db):
    """A role without REPLICATION: `check` and `sync` both name the role and the statement to
    run (sync used to print libpq's "must be superuser or replication role to start
    walsender"), and the statement as printed fixes it."""
    role = f"No Repl {uuid.uuid4().hex[:6]}"
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN; GRANT SELECT ON t TO "{role}"')
    fe.write_source(pg, username=role, create_publication=False, initial_wait_seconds=1)
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE PUBLICATION firn_e2e FOR TABLE t")
    want = (f'firn: role "{role}" lacks the REPLICATION attribute; have a superuser run ALTER '
            f'ROLE "{role}" REPLICATION')
    for args in (["check", "--source", str(fe.source), "--streams", str(fe.streams)],
                 ["sync", *fe.sync_args]):
        assert one_error(run(fe, *args), 3) == want
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(want.split("run ", 1)[1])
    fe.sync()
    assert fe.pyiceberg_arrow("t").select(["id", "v"]).to_pylist() == [{"id": 1, "v": "a"}]


# ---- stream and budget mistakes found by hostile testing --------------------------------------

def test_nullable_primary_key_override(fe, pg, pg_db):
    """A primary_key override on a column that allows NULL is refused before anything is
    written (a NULL key would stop every later run at the change that brings it)."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE nk (u int UNIQUE, w text); ALTER TABLE nk REPLICA IDENTITY FULL")
    fe.write_streams([("nk", {"primary_key": ["u"]})])
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert 'primary_key column "u" allows NULL' in line and "SET NOT NULL" in line, line
    assert not fe.catalog_db.exists() or not fe.catalog().list_namespaces(), "a table was created"


def test_key_override_outside_the_replica_identity(fe, pg, pg_db):
    """trial13: a primary_key override outside the primary key under REPLICA IDENTITY DEFAULT
    synced, and an UPDATE of the override column left the old row in the table (PostgreSQL sends
    no old value of it). check and sync refuse it naming the statement; with it run as printed
    the same change leaves the table equal to the source."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE ko (id int PRIMARY KEY, u int UNIQUE NOT NULL, w text); "
                     "INSERT INTO ko SELECT g, 100 + g, 'w' FROM generate_series(1, 5) g")
    fe.write_streams([("ko", {"primary_key": ["u"]})])
    want = ('firn: stream "public.ko": primary_key column "u" is not in the table\'s primary key, '
            "and under REPLICA IDENTITY DEFAULT an UPDATE that changes it carries no old value, "
            'so the old row would stay; run ALTER TABLE "public"."ko" REPLICA IDENTITY FULL, or '
            "leave primary_key out")
    for args in (["check", "--source", str(fe.source), "--streams", str(fe.streams)],
                 ["sync", *fe.sync_args]):
        assert one_error(run(fe, *args), 2) == want
    assert not fe.catalog_db.exists() or not fe.catalog().list_namespaces(), "a table was created"
    # an append-mode stream keeps no key: no old row to find
    fe.write_streams([("ko", {"primary_key": ["u"], "append_mode": True})])
    assert run(fe, "check", "--source", str(fe.source), "--streams", str(fe.streams)).returncode == 0
    fe.write_streams([("ko", {"primary_key": ["u"]})])
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(want.split("run ", 1)[1].split(", or")[0])
    fe.sync()
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("UPDATE ko SET u = 200 WHERE id = 1")
    fe.sync()
    rows = fe.pyiceberg_arrow("ko").select(["id", "u"]).to_pylist()
    assert sorted((r["id"], r["u"]) for r in rows) == [(1, 200), (2, 102), (3, 103), (4, 104),
                                                       (5, 105)], rows


def test_two_streams_one_target(fe, pg, pg_db):
    """Two source tables that would land in one Iceberg table are a configuration error."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE SCHEMA other; CREATE TABLE other.t (id int PRIMARY KEY, v text)")
    doc = {"selected_streams": {"public": [{"stream_name": "t"}], "other": [{"stream_name": "t"}]}}
    fe.streams.write_text(json.dumps(doc))
    fe.write_destination(namespace="same")
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert 'both write table "same.t"' in line and "target_table" in line, line


@pytest.mark.parametrize("key", ["index_memory_limit", "memory_limit"])
def test_memory_budget_beyond_the_machine(fe, key):
    fe.write_destination(**{key: "18446744073709551615"})
    line = one_error(run(fe, "sync", *fe.sync_args), 2)
    assert f'"{key}"' in line and "larger than this machine's memory" in line, line


def test_table_with_1500_columns_streams_changes(fe, pg, pg_db):
    """PostgreSQL allows 1600 columns; changes of such a table decode (they stopped every run
    past 1024 columns)."""
    cols = ", ".join(f"c{i} int" for i in range(1500))
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(f"CREATE TABLE w (id int PRIMARY KEY, {cols})")
        conn.execute("INSERT INTO w (id, c0, c1499) VALUES (1, 10, 11), (2, 20, 21)")
    fe.write_streams(["w"])
    assert fe.sync().returncode == 0
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("UPDATE w SET c700 = 7, c1499 = 99 WHERE id = 2")
        conn.execute("INSERT INTO w (id, c1) VALUES (3, 5)")
        conn.execute("DELETE FROM w WHERE id = 1")
    proc = fe.sync()
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = sorted(fe.pyiceberg_arrow("w").select(["id", "c0", "c1", "c700", "c1499"]).to_pylist(),
                 key=lambda r: r["id"])
    assert got == [{"id": 2, "c0": 20, "c1": None, "c700": 7, "c1499": 99},
                   {"id": 3, "c0": None, "c1": 5, "c700": None, "c1499": None}], got
