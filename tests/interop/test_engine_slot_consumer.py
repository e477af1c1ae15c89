# SPDX-License-Identifier: Apache-2.0
"""`firn check` and a replication slot another program reads (pg_recvlogical): check used to say
ok (it lets a running firn sync hold the slot) and the sync then failed. Now the slot counts as
firn's only while a firn sync holds the slot's advisory lock: another consumer is the same one
line as at sync (exit 3); a running firn sync still is no error."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from firnutil import FirnEnv, stop_process, wait_for

PG_RECVLOGICAL = "/usr/lib/postgresql/15/bin/pg_recvlogical"
SLOT = "firn_consumer"


@pytest.fixture
def fe(pg, pg_db, firn_bin, tmp_path) -> FirnEnv:
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t VALUES (1, 'a')")
    env = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    env.setup(pg, ["t"], source={"slot": SLOT})
    return env


def slot_active(pg, db) -> bool:
    with pg.connect(dbname=db) as conn:
        row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                           (SLOT,)).fetchone()
    return bool(row and row[0])


def check(fe: FirnEnv):
    return fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "error", timeout=60)


def test_slot_read_by_another_program(fe, pg):
    fe.sync("--log", "error")  # creates the slot and the publication
    other = subprocess.Popen([PG_RECVLOGICAL, "-d", f"dbname={fe.dbname} host={pg.host} "
                              f"port={pg.port} user={pg.user}", "-S", SLOT, "--start", "-o",
                              "proto_version=1", "-o", "publication_names=firn_e2e", "-f",
                              "/dev/null"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: slot_active(pg, fe.dbname), 30, what="pg_recvlogical on the slot")
        proc = check(fe)
        assert proc.returncode == 3, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and re.fullmatch(
            rf'firn: replication slot "{SLOT}" is active for PID (\d+); stop the other consumer '
            r'\(SELECT pg_terminate_backend\(\1\)\) or use another slot', lines[0]), lines
    finally:
        other.terminate()
        other.wait(timeout=30)
    wait_for(lambda: not slot_active(pg, fe.dbname), 30, what="the slot to be free")
    proc = check(fe)
    assert proc.returncode == 0 and proc.stdout == "check: ok (source)\n", proc.stderr
    # a firn sync streaming from the slot is not "another consumer"
    follow = fe.start_follow()
    try:
        wait_for(lambda: slot_active(pg, fe.dbname), 60, what="firn to stream")
        time.sleep(0.5)
        proc = check(fe)
        assert proc.returncode == 0 and proc.stdout == "check: ok (source)\n", proc.stderr
    finally:
        assert stop_process(follow) == 0
