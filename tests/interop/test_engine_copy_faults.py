# SPDX-License-Identifier: Apache-2.0
"""The backfill's COPY reader (src/source/pg/pg_backfill.c, read_copy) against rows far larger
than its 64 KiB room and against a server that fails mid-copy: the backend terminated while a
huge row is half sent, the statement cancelled or timed out, a value the server cannot convert
after a large row, and firn stopped by SIGTERM during a copy over TLS. A chunk is read again a
bounded number of times or fails with the server's message; the table never holds partial or
duplicated rows (compared value by value with PostgreSQL through psycopg, pyiceberg and
DuckDB)."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import pytest

from conftest import PgCluster
from firnutil import FirnEnv, compare_table, firn_errors, stop_process, wait_for


@pytest.fixture(params=["disable", "require"])
def cluster(request, pg) -> tuple[PgCluster, str]:
    if request.param == "require":
        return request.getfixturevalue("pg_tls"), "require"
    return pg, "disable"


def fresh_db(cluster: PgCluster, encoding: str | None = None) -> str:
    name = "c_" + uuid.uuid4().hex[:12]
    extra = (f" ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
             if encoding else "")
    with cluster.connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"{extra}')
    return name


def drop_db(cluster: PgCluster, name: str):
    with cluster.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Rows of 1..N: small ones, medium ones whose tuples are 64 KiB and 128 KiB give or take a few
# bytes (a tuple of (int8, text, bytea) with a NULL bytea is 26 bytes plus the text), and huge
# ones of 12 and 40 MiB text and a 20 MiB bytea.
BIG_SCHEMA = """
CREATE TABLE big (id int8 PRIMARY KEY, note text, blob bytea);
ALTER TABLE big ALTER note SET STORAGE EXTERNAL, ALTER blob SET STORAGE EXTERNAL;
INSERT INTO big SELECT g, 'small ' || g, NULL FROM generate_series(1, 50) g;
INSERT INTO big SELECT 100 + k, left(repeat(md5(k::text), 4200), 65536 - 26 + k), NULL
FROM generate_series(-6, 6) k;
INSERT INTO big SELECT 200 + k, left(repeat(md5(k::text), 8400), 131071 - 26 + k), NULL
FROM generate_series(-6, 6) k;
INSERT INTO big VALUES (300, repeat(md5('a'), 12 * 1048576 / 32), NULL);
INSERT INTO big SELECT 300 + g, 'after ' || g, NULL FROM generate_series(1, 20) g;
INSERT INTO big VALUES (400, NULL, decode(repeat(md5('b'), 20 * 1048576 / 16), 'hex'));
INSERT INTO big VALUES (500, repeat(md5('c'), 40 * 1048576 / 32), NULL);
INSERT INTO big SELECT 500 + g, 'tail ' || g, decode(md5(g::text), 'hex')
FROM generate_series(1, 20) g;
"""


def test_huge_and_room_sized_rows(cluster, firn_bin, duck, tmp_path):
    """Tuples of 64 KiB and 128 KiB give or take 6 bytes (the room's first sizes) and of 12, 20
    and 40 MiB (hundreds of rooms, and a room that grows), in batches of 7 rows."""
    pgc, sslmode = cluster
    db = fresh_db(pgc)
    try:
        with pgc.connect(dbname=db) as conn:
            conn.execute(BIG_SCHEMA)
            fe = FirnEnv(firn_bin, tmp_path / "f", db)
            fe.setup(pgc, ["big"], source={"sslmode": sslmode, "parallelism": 1,
                                           "batch_rows": 7})
            fe.sync(timeout=300)
            rows = compare_table(fe, conn, duck, "big")
            assert len(rows) == 50 + 13 + 13 + 1 + 20 + 1 + 1 + 20
    finally:
        drop_db(pgc, db)


SLOW_SCHEMA = """
CREATE TABLE big (id int8 PRIMARY KEY, note text);
ALTER TABLE big ALTER note SET STORAGE EXTERNAL;
INSERT INTO big SELECT g, CASE WHEN g % 10 = 5 THEN repeat(md5(g::text), 8 * 1048576 / 32)
                              ELSE 'r' || g END FROM generate_series(1, 60) g;
CREATE FUNCTION slow_at(id int8) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
    IF id = 31 THEN PERFORM pg_sleep(%(sleep)s); END IF;
    RETURN true;
END $$;
"""


def copy_backend(conn, db):
    row = conn.execute("SELECT pid, wait_event FROM pg_stat_activity WHERE datname = %s AND "
                       "query LIKE 'COPY (SELECT%%' AND state = 'active'", (db,)).fetchone()
    return row


@pytest.mark.parametrize("how", ["terminate_mid_row", "terminate_sleeping", "cancel_sleeping"])
def test_server_failure_mid_copy_reads_the_chunk_again(cluster, firn_bin, duck, tmp_path, how):
    """The COPY's backend terminated while it is blocked sending an 8 MiB row (ClientWrite: the
    row half received), or terminated or cancelled while it sleeps mid-table after batches of
    the chunk were delivered: the chunk is read again, and its first reading leaves nothing."""
    pgc, sslmode = cluster
    db = fresh_db(pgc)
    try:
        with pgc.connect(dbname=db) as conn:
            sleep = "0" if how == "terminate_mid_row" else "2"
            conn.execute(SLOW_SCHEMA.replace("%(sleep)s", sleep))
            fe = FirnEnv(firn_bin, tmp_path / "f", db)
            fe.setup(pgc, ["big"], source={"sslmode": sslmode, "parallelism": 1,
                                           "batch_rows": 4})
            fe.write_streams([("big", {"filter": "slow_at(id)"})])
            proc = subprocess.Popen([str(fe.firn_bin), "sync", *fe.sync_args],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=fe.env())
            hit = {}

            def strike():
                with pgc.connect() as mon:
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and proc.poll() is None:
                        row = copy_backend(mon, db)
                        want = "ClientWrite" if how == "terminate_mid_row" else "PgSleep"
                        if row and row[1] == want:
                            fn = "pg_cancel_backend" if how == "cancel_sleeping" \
                                else "pg_terminate_backend"
                            mon.execute(f"SELECT {fn}(%s)", (row[0],))
                            hit["pid"] = row[0]
                            return
                        time.sleep(0.005)

            t = threading.Thread(target=strike)
            t.start()
            out, err = proc.communicate(timeout=300)
            t.join()
            assert hit, "the COPY backend was never seen " + err[-2000:]
            assert proc.returncode == 0, err[-4000:]
            assert "retrying chunk" in err, err[-4000:]
            compare_table(fe, conn, duck, "big")
    finally:
        drop_db(pgc, db)


def test_statement_timeout_fails_with_the_servers_message(pg, firn_bin, tmp_path):
    """Every reading times out: three retries, then the server's message, and no rows."""
    db = fresh_db(pg)
    try:
        with pg.connect(dbname=db) as conn:
            conn.execute(SLOW_SCHEMA.replace("%(sleep)s", "3"))
            conn.execute(f'ALTER DATABASE "{db}" SET statement_timeout = \'1s\'')
            fe = FirnEnv(firn_bin, tmp_path / "f", db)
            fe.setup(pg, ["big"], source={"parallelism": 1, "batch_rows": 4})
            fe.write_streams([("big", {"filter": "slow_at(id)"})])
            proc = fe.sync(check=False, timeout=120)
            assert proc.returncode != 0, proc.stderr[-3000:]
            assert proc.stderr.count("retrying chunk") == 3, proc.stderr[-4000:]
            last = proc.stderr.strip().splitlines()[-1]
            assert "statement timeout" in last, last
            cat = fe.catalog()
            try:
                tbl = cat.load_table("e2e.big")
                assert tbl.scan().to_arrow().num_rows == 0
            except Exception as e:  # noqa: BLE001
                assert "NoSuchTable" in type(e).__name__, e
    finally:
        drop_db(pg, db)


def test_bad_encoding_after_large_row(pg, firn_bin, tmp_path):
    """Invalid UTF-8 after 3 MiB rows (SQL_ASCII database): the server's 22021 mid-stream ends
    the copy at once, without a retry, naming the problem."""
    db = fresh_db(pg, "SQL_ASCII")
    try:
        with pg.connect(dbname=db) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
            conn.execute("ALTER TABLE t ALTER v SET STORAGE EXTERNAL")
            conn.execute("INSERT INTO t SELECT g, repeat(md5(g::text), 3 * 1048576 / 32) "
                         "FROM generate_series(1, 5) g")
            conn.execute("INSERT INTO t VALUES (6, 'caf' || chr(233))")
            conn.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(7, 50) g")
            fe = FirnEnv(firn_bin, tmp_path / "f", db)
            fe.setup(pg, ["t"], source={"parallelism": 1, "batch_rows": 2})
            proc = fe.sync(check=False)
            assert proc.returncode == 3, proc.stderr[-3000:]
            assert "retrying chunk" not in proc.stderr
            last = proc.stderr.strip().splitlines()[-1]
            assert "SQLSTATE 22021" in last, last
    finally:
        drop_db(pg, db)


def test_sigterm_during_a_tls_copy_of_big_rows(pg_tls, firn_bin, duck, tmp_path):
    """SIGTERM amid 8 MiB rows over TLS: a clean stop, and the next run makes the table exact."""
    db = fresh_db(pg_tls)
    try:
        with pg_tls.connect(dbname=db) as conn:
            # The filter sleeps 5 s at id 31, so the COPY cannot end before the signal lands
            # (with no sleep a quick machine finished the 60 rows inside the 0.3 s below).
            conn.execute(SLOW_SCHEMA.replace("%(sleep)s", "5"))
            fe = FirnEnv(firn_bin, tmp_path / "f", db)
            fe.setup(pg_tls, ["big"], source={"sslmode": "require", "parallelism": 1,
                                              "batch_rows": 4})
            fe.write_streams([("big", {"filter": "slow_at(id)"})])
            proc = subprocess.Popen([str(fe.firn_bin), "sync", *fe.sync_args],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=fe.env())
            with pg_tls.connect() as mon:
                wait_for(lambda: proc.poll() is not None or copy_backend(mon, db), 60,
                         interval=0.005, what="the COPY")
            time.sleep(0.3)
            assert proc.poll() is None, "the COPY ended before the signal"
            rc = stop_process(proc, timeout=60)
            err = proc.stderr.read()
            assert rc == 0 and "sync stopped" in err, err[-4000:]
            assert not firn_errors(err), err[-4000:]
            fe.sync(timeout=300)
            compare_table(fe, conn, duck, "big")
    finally:
        drop_db(pg_tls, db)


def test_sigterm_while_the_server_sends_nothing(cluster, firn_bin, tmp_path):
    """A COPY whose server is busy without sending (here a filter that sleeps 20 s mid-table; in
    life a selective filter over a big table, or a lock wait) must not hold up a stop: the
    reader's wait checks for it (without TLS each 2 ms poll, with TLS a 100 ms poll before
    libpq's blocking read) and cancels the statement. Before, firn stopped only when the server
    sent its next row, 20 s later."""
    pgc, sslmode = cluster
    db = fresh_db(pgc)
    try:
        with pgc.connect(dbname=db) as conn:
            conn.execute(SLOW_SCHEMA.replace("%(sleep)s", "20"))
        fe = FirnEnv(firn_bin, tmp_path / "f", db)
        fe.setup(pgc, ["big"], source={"sslmode": sslmode, "parallelism": 1, "batch_rows": 4})
        fe.write_streams([("big", {"filter": "slow_at(id)"})])
        proc = subprocess.Popen([str(fe.firn_bin), "sync", *fe.sync_args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=fe.env())
        with pgc.connect() as mon:
            wait_for(lambda: proc.poll() is not None or
                     (copy_backend(mon, db) or (0, ""))[1] == "PgSleep", 60, interval=0.01,
                     what="the COPY's server-side sleep")
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            start = time.monotonic()
            rc = stop_process(proc, timeout=30)
            took = time.monotonic() - start
            err = proc.stderr.read()
            assert rc == 0, err[-3000:]
            assert took < 8, f"firn took {took:.1f} s to stop:\n{err[-3000:]}"
            assert not firn_errors(err), err[-3000:]
            # The statement was cancelled, not left sleeping on the server.
            wait_for(lambda: copy_backend(mon, db) is None, 5, what="the COPY to end")
    finally:
        drop_db(pgc, db)
