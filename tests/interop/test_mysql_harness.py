# SPDX-License-Identifier: Apache-2.0
"""Proves the MariaDB test harness (tests/harness/mariadb_cluster.sh): the settings chosen per
server reach the server, the users have the privileges the harness promises, TLS works with the
CA it makes, and `stop` leaves nothing behind."""

from __future__ import annotations

import subprocess

import pymysql
import pytest

from mysql_fixtures import MARIADB_CLUSTER, mariadb, mariadb_db, mariadb_server  # noqa: F401


def _vars(conn, *names: str) -> dict[str, str]:
    cur = conn.cursor()
    cur.execute("SELECT " + ", ".join(f"@@GLOBAL.{n}" for n in names))
    return dict(zip(names, (str(v) for v in cur.fetchone())))


def test_default_settings(mariadb):
    with mariadb.connect() as conn:
        got = _vars(conn, "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
                    "gtid_strict_mode", "server_id", "version", "time_zone")
    assert got["log_bin"] == "1"
    assert got["binlog_format"] == "ROW"
    assert got["binlog_row_image"] == "FULL"
    assert got["binlog_row_metadata"] == "FULL"
    assert got["gtid_strict_mode"] == "1"
    assert got["server_id"] == "1"
    assert got["version"].startswith("10.11.")
    assert got["time_zone"] == "+00:00"


def test_firn_user_privileges(mariadb, mariadb_db):
    with mariadb.connect(database=mariadb_db) as admin:
        admin.cursor().execute("CREATE TABLE t (id int PRIMARY KEY, s varchar(10))")
        admin.cursor().execute("INSERT INTO t VALUES (1, 'ä')")
    with mariadb.connect(database=mariadb_db, admin=False) as conn:
        cur = conn.cursor()
        cur.execute("SELECT id, s FROM t")
        assert cur.fetchall() == ((1, "ä"),)
        cur.execute("SHOW BINARY LOGS")  # needs REPLICATION CLIENT (BINLOG MONITOR)
        assert cur.fetchall()
        with pytest.raises(pymysql.err.OperationalError, match="denied"):
            cur.execute("INSERT INTO t VALUES (2, 'b')")
    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
        mariadb.connect(password="wrong", user=mariadb.user, admin=False)


def test_settings_per_server_and_stop():
    server = mariadb_server({"FIRN_MYSQL_BINLOG_FORMAT": "STATEMENT",
                             "FIRN_MYSQL_BINLOG_ROW_IMAGE": "MINIMAL",
                             "FIRN_MYSQL_SERVER_ID": "7", "FIRN_MYSQL_GTID_STRICT_MODE": "0"})
    root = server.root
    try:
        with server.connect() as conn:
            got = _vars(conn, "binlog_format", "binlog_row_image", "server_id", "gtid_strict_mode")
        assert got == {"binlog_format": "STATEMENT", "binlog_row_image": "MINIMAL",
                       "server_id": "7", "gtid_strict_mode": "0"}
    finally:
        server.stop()
    assert not root.exists()
    with pytest.raises(pymysql.err.OperationalError):
        server.connect(connect_timeout=2)


def test_no_binlog():
    server = mariadb_server({"FIRN_MYSQL_LOG_BIN": "0"})
    try:
        with server.connect() as conn:
            assert _vars(conn, "log_bin")["log_bin"] == "0"
    finally:
        server.stop()


def test_tls():
    server = mariadb_server({"FIRN_MYSQL_SSL": "1"})
    try:
        ssl = {"ca": server.env["FIRN_TEST_MYSQL_SSL_CA"], "check_hostname": True}
        with server.connect(admin=False, ssl=ssl) as conn:
            cur = conn.cursor()
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
            assert cur.fetchone()[1].startswith("TLS")
    finally:
        server.stop()


def test_bad_setting_is_refused():
    proc = subprocess.run(["bash", str(MARIADB_CLUSTER), "start", "/nonexistent/x"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin:/usr/sbin", "FIRN_MYSQL_BINLOG_FORMAT": "rows"})
    assert proc.returncode == 2
    assert "FIRN_MYSQL_BINLOG_FORMAT must be ROW, STATEMENT or MIXED" in proc.stderr
