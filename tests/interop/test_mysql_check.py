# SPDX-License-Identifier: Apache-2.0
"""`firn check` and `firn discover` against real MariaDB 10.11 servers (mariadb_cluster.sh):
a good source passes; each bad setting (wrong password, unreachable host, binlog off, STATEMENT
format, MINIMAL row image, missing privileges, firn's server_id taken by the server, a selected
table without a key or gone) fails with one `firn:` line naming the remedy and the README's exit
code; discover lists the database's tables with their keys and Iceberg types (namespace =
database); OLake's MySQL field names are accepted; TLS modes connect or refuse as they should."""

from __future__ import annotations

import json
import socket

import pytest

from mysql_fixtures import mariadb, mariadb_db, mariadb_server  # noqa: F401


def one_error(proc, code: int) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, expected {code}:\n{proc.stderr}"
    assert len(lines) == 1 and lines[0].startswith("firn: "), f"not one line:\n{proc.stderr}"
    return lines[0]


class Job:
    def __init__(self, firn_bin, root):
        self.firn_bin = firn_bin
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.source = root / "source.json"
        self.streams = root / "streams.json"

    def write_source(self, doc: dict):
        self.source.write_text(json.dumps(doc))

    def write_streams(self, database: str, tables: list[tuple[str, dict]]):
        items = []
        for name, opts in tables:
            item = {"stream_name": name, "sync_mode": "full_refresh"}
            item.update(opts)
            items.append(item)
        self.streams.write_text(json.dumps({"selected_streams": {database: items}}))

    def run(self, *args: str):
        import subprocess

        return subprocess.run([str(self.firn_bin), *args], capture_output=True, text=True,
                              timeout=120)

    def check(self, streams: bool = False):
        args = ["check", "--source", str(self.source)]
        if streams:
            args += ["--streams", str(self.streams)]
        return self.run(*args, "--log", "warn")


@pytest.fixture
def job(firn_bin, tmp_path):
    return Job(firn_bin, tmp_path / "firn")


def make_tables(server, db):
    with server.connect(database=db) as conn:
        cur = conn.cursor()
        cur.execute("CREATE TABLE orders (id bigint unsigned PRIMARY KEY, amount decimal(65,30),"
                    " at datetime(6), note varchar(20) CHARACTER SET latin1, "
                    "secret int INVISIBLE, total int AS (id * 2) VIRTUAL)")
        cur.execute("CREATE TABLE keyless (a int, b text)")
        cur.execute("CREATE TABLE pk2 (a int, b varchar(5), PRIMARY KEY (b, a))")


def test_check_ok_and_secret_not_logged(mariadb, mariadb_db, job):
    make_tables(mariadb, mariadb_db)
    job.write_source(mariadb.source_json(mariadb_db, server_id=4242))
    job.write_streams(mariadb_db, [("orders", {"sync_mode": "full_refresh_cdc"})])
    proc = job.check(streams=True)
    assert proc.returncode == 0, proc.stderr
    assert mariadb.password not in proc.stderr + proc.stdout
    assert "level=error" not in proc.stderr


def test_olake_field_names(mariadb, mariadb_db, job):
    make_tables(mariadb, mariadb_db)
    doc = {"type": "mysql", "hosts": mariadb.host, "port": mariadb.port,
           "database": mariadb_db, "username": mariadb.user, "password": mariadb.password,
           "ssl": {"mode": "disable"}, "max_threads": 2, "backoff_retry_count": 2,
           "update_method": {"initial_wait_time": 10}, "jdbc_url_params": {}}
    job.write_source(doc)
    proc = job.check()
    assert proc.returncode == 0, proc.stderr


def test_wrong_password_and_unreachable(mariadb, mariadb_db, job):
    job.write_source(mariadb.source_json(mariadb_db, password="not-the-password"))
    line = one_error(job.check(), 3)
    assert "Access denied" in line and "not-the-password" not in line
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    job.write_source(mariadb.source_json(mariadb_db, port=port, connect_timeout_seconds=2))
    line = one_error(job.check(), 3)
    assert "could not connect" in line and str(port) in line
    job.write_source(mariadb.source_json("no_such_db"))
    assert "Unknown database" in one_error(job.check(), 3)


def test_config_errors(mariadb, mariadb_db, job):
    job.write_source(mariadb.source_json(mariadb_db, slot="x"))
    assert "PostgreSQL setting" in one_error(job.check(), 2)
    job.write_source(mariadb.source_json(mariadb_db, ssl_mode="verify_ca"))
    line = one_error(job.check(), 2)
    assert "ssl_ca" in line


def test_discover(mariadb, mariadb_db, job):
    make_tables(mariadb, mariadb_db)
    job.write_source(mariadb.source_json(mariadb_db))
    out = job.root / "discovered.json"
    proc = job.run("discover", "--source", str(job.source), "--output", str(out))
    if proc.returncode != 0 and "--output" in proc.stderr:
        proc = job.run("discover", "--source", str(job.source), "--streams", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    streams = {s["stream"]["name"]: s["stream"] for s in doc["streams"]}
    assert set(streams) == {"orders", "keyless", "pk2"}
    assert all(s["namespace"] == mariadb_db for s in streams.values())
    orders = streams["orders"]
    assert orders["source_defined_primary_key"] == ["id"]
    assert streams["pk2"]["source_defined_primary_key"] == ["b", "a"]
    assert streams["keyless"]["source_defined_primary_key"] == []
    fields = {f["name"]: f for f in json.loads(json.dumps(orders["type_schema"]))["fields"]}
    assert list(fields) == ["id", "amount", "at", "note", "secret", "total"]
    assert fields["id"]["type"] == "decimal(20, 0)" and fields["id"]["required"]
    assert fields["amount"]["type"] == "string"
    assert fields["at"]["type"] == "timestamp" and not fields["at"]["required"]
    assert fields["note"]["type"] == "string"
    assert orders["supported_sync_modes"] == ["full_refresh"]
    selected = doc["selected_streams"][mariadb_db]
    assert {s["stream_name"] for s in selected} == {"orders", "keyless", "pk2"}


@pytest.mark.parametrize("settings, want", [
    ({"FIRN_MYSQL_LOG_BIN": "0"}, ["log_bin=OFF"]),
    ({"FIRN_MYSQL_BINLOG_FORMAT": "STATEMENT"}, ["binlog_format is STATEMENT", "ROW"]),
    ({"FIRN_MYSQL_BINLOG_ROW_IMAGE": "MINIMAL"}, ["binlog_row_image is MINIMAL", "FULL"]),
    ({"FIRN_MYSQL_BINLOG_ROW_METADATA": "MINIMAL"}, ["binlog_row_metadata is MINIMAL"]),
    ({"FIRN_MYSQL_EXPIRE_LOGS_DAYS": "0",
      "FIRN_MYSQL_EXTRA_CNF": "binlog_expire_logs_seconds=600"}, ["expire after 600s"]),
])
def test_cdc_settings_refused(settings, want, job):
    server = mariadb_server(settings)
    try:
        with server.connect() as conn:
            conn.cursor().execute("CREATE TABLE firn_test.t (id int PRIMARY KEY)")
        job.write_source(server.source_json("firn_test", server_id=77))
        job.write_streams("firn_test", [("t", {"sync_mode": "full_refresh_cdc"})])
        line = one_error(job.check(streams=True), 3)
        for w in want:
            assert w in line, line
        # Without a CDC stream the binlog does not matter.
        job.write_streams("firn_test", [("t", {"sync_mode": "full_refresh"})])
        assert job.check(streams=True).returncode == 0
    finally:
        server.stop()


def test_privileges_server_id_and_tables(mariadb, mariadb_db, job):
    make_tables(mariadb, mariadb_db)
    with mariadb.connect() as conn:
        cur = conn.cursor()
        cur.execute("CREATE USER IF NOT EXISTS 'weak'@'%' IDENTIFIED BY 'weak_pw'")
        cur.execute(f"GRANT SELECT ON `{mariadb_db}`.`orders` TO 'weak'@'%'")
    cdc = {"sync_mode": "full_refresh_cdc"}
    job.write_source(mariadb.source_json(mariadb_db, username="weak", password="weak_pw",
                                         server_id=99))
    job.write_streams(mariadb_db, [("orders", cdc)])
    assert "REPLICATION SLAVE" in one_error(job.check(streams=True), 3)
    job.write_source(mariadb.source_json(mariadb_db, username="weak", password="weak_pw"))
    job.write_streams(mariadb_db, [("pk2", {})])
    line = one_error(job.check(streams=True), 3)  # the table is invisible to the user
    assert "no table" in line and f"GRANT SELECT ON `{mariadb_db}`.`pk2`" in line
    job.write_source(mariadb.source_json(mariadb_db, server_id=1))  # the server's own
    job.write_streams(mariadb_db, [("orders", cdc)])
    assert "server's own server_id" in one_error(job.check(streams=True), 3)
    job.write_source(mariadb.source_json(mariadb_db, server_id=99))
    job.write_streams(mariadb_db, [("keyless", cdc)])
    assert "has no primary key" in one_error(job.check(streams=True), 3)
    job.write_streams(mariadb_db, [("keyless", dict(cdc, append_mode=True))])
    assert job.check(streams=True).returncode == 0
    job.write_streams(mariadb_db, [("gone", {})])
    line = one_error(job.check(streams=True), 3)
    assert "no table" in line and "gone" in line


def test_tls_modes(job):
    server = mariadb_server({"FIRN_MYSQL_SSL": "1"})
    try:
        ca = server.env["FIRN_TEST_MYSQL_SSL_CA"]
        for mode, extra in [("required", {}), ("verify_ca", {"ssl_ca": ca}),
                            ("verify_identity", {"ssl_ca": ca})]:
            job.write_source(server.source_json("firn_test", ssl_mode=mode, **extra))
            proc = job.run("check", "--source", str(job.source), "--log", "info")
            assert proc.returncode == 0, proc.stderr
            assert "TLS on" in proc.stderr, proc.stderr
        # A CA that did not sign the server's certificate is refused.
        job.write_source(server.source_json("firn_test", ssl_mode="verify_ca",
                                            ssl_ca=server.env["FIRN_TEST_MYSQL_SSL_CERT"]))
        one_error(job.check(), 3)
        # localhost is in the certificate; a name that is not fails verify_identity only.
        job.write_source(server.source_json("firn_test", ssl_mode="disabled"))
        proc = job.run("check", "--source", str(job.source), "--log", "info")
        assert proc.returncode == 0 and "TLS off" in proc.stderr, proc.stderr
    finally:
        server.stop()
