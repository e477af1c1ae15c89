# SPDX-License-Identifier: Apache-2.0
"""`firn check`, `firn status` and `firn discover` against a real source and catalog (issue 7,
check 4): check's verdict and that its probes leave nothing behind, status lines before and after
a sync (position equal to the table's snapshot summary, lag against the source's WAL), and
discover keeping the selections and options of an edited streams file on a second run."""

from __future__ import annotations

import json
import re
import subprocess
import time

from firnutil import FirnEnv, compare_table, stop_process, wait_for

SCHEMA = """
CREATE TABLE orders (id int8 PRIMARY KEY, placed date, total numeric(10, 2));
CREATE TABLE notes (body text, at timestamptz);
CREATE TABLE refunds (id int4 PRIMARY KEY, order_id int8, amount numeric(10, 2));
ALTER TABLE notes REPLICA IDENTITY FULL;
INSERT INTO orders SELECT g, date '2024-01-01' + g, g * 2.5 FROM generate_series(1, 20) g;
INSERT INTO notes VALUES ('first', now());
"""


def lsn_text(v: int) -> str:
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


def size_bytes(text: str) -> float:
    """The bytes a status size stands for ("1 byte", "512 bytes", "1.5 MiB"), to a tenth of its
    unit."""
    m = re.fullmatch(r"(\d+) bytes?|(\d+\.\d) (KiB|MiB|GiB|TiB)", text)
    assert m, text
    if m.group(1) is not None:
        assert (m.group(0) == "1 byte") == (m.group(1) == "1"), text
        return int(m.group(1))
    return float(m.group(2)) * 1024 ** (1 + ["KiB", "MiB", "GiB", "TiB"].index(m.group(3)))


def status_lines(fe: FirnEnv, *extra: str) -> dict[str, list[str]]:
    proc = fe.run("status", "--streams", str(fe.streams), "--state", str(fe.state), *extra,
                  "--log", "error")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["stream", "table", "mode", "backfill", "committed", "lsn", "last",
                                "commit", "(UTC)", "lag"]
    return {ln.split()[0]: ln for ln in lines[1:]}


def test_check_ok_and_leaves_nothing_behind(pg, pg_db, firn_bin, tmp_path):
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["orders"])
    fe.warehouse.mkdir(parents=True)
    proc = fe.run("check", "--source", str(fe.source), "--destination", str(fe.destination))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "check: ok (source, destination)\n"
    assert "source ok" in proc.stderr and "destination ok" in proc.stderr
    proc = fe.run("check", "--destination", str(fe.destination))
    assert (proc.returncode, proc.stdout) == (0, "check: ok (destination)\n"), proc.stderr
    proc = fe.run("check", "--source", str(fe.source), "--log", "error")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "check: ok (source)\n", "")
    assert fe.catalog().list_namespaces() == []
    assert list(fe.warehouse.iterdir()) == []


def test_check_names_tables_at_toast_risk(pg, pg_db, firn_bin, tmp_path):
    """`check --streams` runs sync's replication preflight: the replication connection opens,
    the slot and publication firn will create may be missing, and the selected tables whose
    unchanged large values would need a fetch (TOAST-able columns, REPLICA IDENTITY DEFAULT) are
    named in one warning; REPLICA IDENTITY FULL (notes) and numeric-only tables (orders) are
    not."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text, blob bytea)")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["orders", "notes", "docs"])
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "warn")
    assert (proc.returncode, proc.stdout) == (0, "check: ok (source)\n"), proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "1 table with large (TOAST) columns and REPLICA IDENTITY DEFAULT: public.docs;" in \
        lines[0], lines[0]
    assert "REPLICA IDENTITY FULL makes it exact" in lines[0], lines[0]
    with pg.connect(dbname=pg_db) as conn:  # check created nothing on the source
        assert conn.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s",
                            (pg_db,)).fetchone()[0] == 0
        conn.execute("ALTER TABLE docs REPLICA IDENTITY FULL")
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "warn")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "check: ok (source)\n", "")


def test_check_warns_of_published_tables_without_replica_identity(pg, pg_db, firn_bin, tmp_path):
    """A publication FOR ALL TABLES with a table that has neither a primary key nor a replica
    identity makes PostgreSQL refuse every UPDATE and DELETE on it, the application's own, even
    when firn does not stream that table: check warns, naming it (a key-less table with REPLICA
    IDENTITY FULL is fine), and says nothing once it has one."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        conn.execute("CREATE TABLE logs (at timestamptz, line text)")
        conn.execute("CREATE PUBLICATION firn_e2e FOR ALL TABLES")
        try:
            conn.execute("UPDATE logs SET line = 'x'")  # no rows, still refused
            refused = False
        except Exception as exc:  # psycopg.errors.ObjectNotInPrerequisiteState
            refused = "does not have a replica identity" in str(exc)
        assert refused
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, ["orders"])
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "warn")
    assert (proc.returncode, proc.stdout) == (0, "check: ok (source)\n"), proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if "replica identity:" in ln]
    assert len(lines) == 1, proc.stderr
    assert "of 1 table without a primary key or replica identity: public.logs;" in lines[0], \
        lines[0]
    assert "public.notes" not in lines[0] and "public.orders" not in lines[0], lines[0]
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("ALTER TABLE logs REPLICA IDENTITY FULL")
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "warn")
    assert proc.returncode == 0 and "replica identity:" not in proc.stderr, proc.stderr


def test_toast_risk_counts_selected_columns_only(pg, pg_db, firn_bin, tmp_path):
    """The TOAST warning names a table only when a TOAST-able column is among the columns its
    stream selects: at `firn check` and at the start of `firn sync`."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE narrow (id int PRIMARY KEY, n int, body text); "
                     "INSERT INTO narrow VALUES (1, 1, 'x'); "
                     "CREATE TABLE wide (id int PRIMARY KEY, n int, body text); "
                     "INSERT INTO wide VALUES (1, 1, 'y')")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, [("narrow", {"columns": ["id", "n"]}), "wide"])
    want = "1 table with large (TOAST) columns and REPLICA IDENTITY DEFAULT: public.wide;"
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "warn")
    assert (proc.returncode, proc.stdout) == (0, "check: ok (source)\n"), proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0], proc.stderr
    proc = fe.sync("--log", "info")
    toast = [ln for ln in proc.stderr.splitlines() if "(TOAST) columns" in ln]
    assert len(toast) == 1 and want in toast[0], proc.stderr
    # Selecting the text column brings the table back into the warning.
    fe.write_streams(["narrow", "wide"])
    proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                  "warn")
    assert "2 tables with large (TOAST) columns and REPLICA IDENTITY DEFAULT: public.narrow, " \
        "public.wide;" in proc.stderr, proc.stderr


def test_column_grants_cover_the_selected_columns(pg, pg_db, firn_bin, tmp_path):
    """A role with SELECT on some columns only (GRANT SELECT (a, b) ON t) passes the preflight
    when the stream selects only those columns; otherwise the line names the missing ones."""
    role = f"cols_{pg_db}"
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE g (id int PRIMARY KEY, n int, secret text); "
                     "INSERT INTO g VALUES (1, 10, 's1'), (2, 20, 's2'); "
                     "CREATE PUBLICATION pub_g FOR TABLE g WITH (publish_via_partition_root)")
        conn.execute(f'CREATE ROLE "{role}" LOGIN REPLICATION')
        conn.execute(f'GRANT SELECT (id, n) ON g TO "{role}"')
    try:
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg, username=role, publication="pub_g", create_publication=False,
                        slot=f"s_{pg_db}")
        fe.write_destination()
        fe.write_streams([("g", {"columns": ["id", "n"]})])
        args = ["check", "--source", str(fe.source), "--streams", str(fe.streams), "--log",
                "error"]
        proc = fe.run(*args, timeout=60)
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
        # The sync reads only those columns: copy and stream.
        fe.sync()
        with pg.connect(dbname=pg_db, autocommit=True) as conn:
            conn.execute("INSERT INTO g VALUES (3, 30, 's3'); UPDATE g SET n = 11 WHERE id = 1")
        fe.sync()
        got = fe.catalog().load_table("e2e.g").scan(selected_fields=("id", "n")).to_arrow()
        assert sorted((r["id"], r["n"]) for r in got.to_pylist()) == [(1, 11), (2, 20), (3, 30)]
        fe.write_streams(["g"])
        proc = fe.run(*args, timeout=60)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.strip() == (
            f'firn: permission denied for column "secret" of table "public.g" (the role may '
            f'read only some columns); run GRANT SELECT ("secret") ON "public"."g" TO '
            f'"{role}", or leave it out with the stream\'s "columns"'), proc.stderr
        with pg.connect(dbname=pg_db, autocommit=True) as conn:
            conn.execute(f'REVOKE SELECT (id, n) ON g FROM "{role}"')
        proc = fe.run(*args, timeout=60)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.strip() == (
            f'firn: permission denied for table "public.g"; run GRANT SELECT ON "public"."g" '
            f'TO "{role}"'), proc.stderr
    finally:
        with pg.connect(dbname=pg_db, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"; DROP ROLE "{role}"')


def test_status_before_and_after_sync(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["orders", "notes"])
        lines = status_lines(fe, "--destination", str(fe.destination))
        assert set(lines) == {"public.orders", "public.notes"}
        assert lines["public.orders"].split() == ["public.orders", "e2e.orders",
                                                  "full_refresh_cdc", "pending", "-", "never", "-"]
        # without the destination file the target namespace is unknown: not guessed
        assert status_lines(fe)["public.orders"].split()[1] == "-"

        fe.sync()
        conn.execute("INSERT INTO orders VALUES (100, '2025-01-01', 1)")
        fe.sync()
        before = int(time.time())
        conn.execute("INSERT INTO refunds VALUES (1, 1, 1)")  # WAL the streams do not carry
        lines = status_lines(fe, "--source", str(fe.source), "--destination", str(fe.destination))
        wal = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]
        for name in ("orders", "notes"):
            snap = fe.catalog().load_table(f"e2e.{name}").current_snapshot()
            lsn = int(snap.summary["firn.lsn"])
            f = lines[f"public.{name}"].split()
            assert f[:5] == [f"public.{name}", f"e2e.{name}", "full_refresh_cdc", "done",
                             lsn_text(lsn)], lines[f"public.{name}"]
            committed = time.mktime(time.strptime(f"{f[5]} {f[6]}", "%Y-%m-%d %H:%M:%S"))
            assert abs(committed - time.timezone - before) < 120  # UTC
            m = re.fullmatch(r"(.+), (\d+)s", " ".join(f[7:]))
            assert m, lines[f"public.{name}"]
            assert 0 < size_bytes(m.group(1)) <= wal - lsn + 1024 * 1024
        # orders committed a later change than notes
        assert int(fe.catalog().load_table("e2e.orders").current_snapshot().summary["firn.lsn"]) \
            > int(fe.catalog().load_table("e2e.notes").current_snapshot().summary["firn.lsn"])
        # without --source: the age of the last commit only
        f = status_lines(fe, "--destination", str(fe.destination))["public.orders"].split()
        assert re.fullmatch(r"\d+s since commit", " ".join(f[7:])), f
        # a lost state file: the next run (nothing to commit) writes every table's entry back
        fe.state.unlink()
        fe.sync()
        again = status_lines(fe, "--destination", str(fe.destination))
        for name in ("orders", "notes"):
            snap = fe.catalog().load_table(f"e2e.{name}").current_snapshot()
            f = again[f"public.{name}"].split()
            assert f[3:5] == ["done", lsn_text(int(snap.summary["firn.lsn"]))], f
            assert time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(snap.timestamp_ms // 1000)) \
                == f"{f[5]} {f[6]}", f
        # streams not selected are not listed
        fe.write_streams(["orders"])
        assert set(status_lines(fe)) == {"public.orders"}


def test_status_sizes_and_ages_read_well(pg, pg_db, firn_bin, tmp_path):
    """The lag reads as people say it at every magnitude: binary units past 1023 bytes, a
    singular byte, the age in its two largest units; state.json keeps the exact position."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["orders"])
        assert "sync finished: 1 table, 20 rows written," in fe.sync().stderr
        conn.execute("UPDATE orders SET total = 1 WHERE id = 1")
        assert "sync finished: 1 table, 1 row written," in fe.sync().stderr
        args = ("--source", str(fe.source), "--destination", str(fe.destination))

        def lag_after(back: int, age_s: int) -> str:
            doc = json.loads(fe.state.read_text())
            wal = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]
            st = doc["streams"][0]["state"]
            st["lsn"] = lsn_text(int(wal) - back)
            st["last_commit_us"] = int((time.time() - age_s) * 1e6)
            fe.state.write_text(json.dumps(doc))
            f = status_lines(fe, *args)["public.orders"].split()
            assert f[4] == lsn_text(int(wal) - back), f  # the position stays exact
            return " ".join(f[7:])

        # an idle server's WAL may move by a record between the two reads: ranges, not values
        lag = lag_after(3 * 1024 * 1024 // 2, 3 * 86400 + 4 * 3600 + 30)
        assert re.fullmatch(r"1\.[56] MiB, 3d 4h", lag), lag
        lag = lag_after(10 * 1024, 3599)
        assert re.fullmatch(r"10\.[01] KiB, (59m 59s|1h 0m)", lag), lag
        lag = lag_after(1, 65)
        m = re.fullmatch(r"(.+), 1m [56]s", lag)  # "1 byte" (size_bytes checks the singular)
        assert m and 1 <= size_bytes(m.group(1)) < 1024, lag
        f = status_lines(fe, "--destination", str(fe.destination))["public.orders"].split()
        assert re.fullmatch(r"1m [56]s since commit", " ".join(f[7:])), f


def selected(doc: dict) -> dict[str, dict]:
    return {s["stream_name"]: s for s in doc["selected_streams"].get("public", [])}


def test_discover_keeps_selections(pg, pg_db, firn_bin, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg, default_mode="full_refresh_cdc")
        proc = fe.run("discover", "--source", str(fe.source), "--output", str(fe.streams))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"discover: wrote {fe.streams}\n"
        doc = json.loads(fe.streams.read_text())
        names = {s["stream"]["name"] for s in doc["streams"]}
        assert names == {"orders", "notes", "refunds"}
        sel = selected(doc)
        assert set(sel) == {"orders", "notes", "refunds"}  # a first discover selects everything
        assert all(s.get("sync_mode", "full_refresh_cdc") == "full_refresh_cdc"
                   for s in sel.values())
        assert sel["notes"].get("append_mode") is True  # no primary key
        orders = next(s for s in doc["streams"] if s["stream"]["name"] == "orders")
        assert orders["stream"]["source_defined_primary_key"] == ["id"]
        assert set(orders["stream"]["available_cursor_fields"]) == {"id", "placed", "total"}
        # the Iceberg schema firn will create (field ids, types, nullability)
        ts = orders["stream"]["type_schema"]
        assert ts["type"] == "struct"
        assert [(f["id"], f["name"], f["type"], f["required"]) for f in ts["fields"]] == [
            (1, "id", "long", True), (2, "placed", "date", False),
            (3, "total", "decimal(10, 2)", False)]

        # The user edits the file: drops refunds, changes orders' options.
        edited_orders = {"stream_name": "orders", "sync_mode": "cdc_only",
                         "partition": ["month(placed)"], "destination_table": "orders_v2",
                         "filter": "id > 0", "commit": {"interval_seconds": 2.5},
                         "soft_delete": False, "cursor_field": "placed:id"}
        doc["selected_streams"]["public"] = [
            edited_orders,
            {"stream_name": "notes", "sync_mode": "full_refresh", "append_mode": True},
        ]
        fe.streams.write_text(json.dumps(doc, indent=2))
        conn.execute("CREATE TABLE added_later (id int PRIMARY KEY)")

        proc = fe.run("discover", "--source", str(fe.source), "--streams", str(fe.streams))
        assert proc.returncode == 0, proc.stderr
        doc2 = json.loads(fe.streams.read_text())
        assert {s["stream"]["name"] for s in doc2["streams"]} == \
            {"orders", "notes", "refunds", "added_later"}
        sel = selected(doc2)
        assert set(sel) == {"orders", "notes"}, sel
        assert sel["orders"] == edited_orders  # every option, spelled as the user wrote it
        assert sel["notes"]["sync_mode"] == "full_refresh"
        assert sel["notes"].get("append_mode") is True

        # The file firn wrote loads again and syncs what is selected.
        fe.write_destination()
        fe.sync()
        tables = {t for _, t in fe.catalog().list_tables("e2e")}
        assert tables == {"orders_v2", "notes"}


def test_discover_lists_only_modes_that_work(pg, pg_db, firn_bin, tmp_path):
    """supported_sync_modes leaves out the CDC modes for a table firn sync refuses to stream (no
    primary key and no replica identity), and the stream's "notes" say why; a table with a key,
    REPLICA IDENTITY FULL or USING INDEX keeps them. A selection that still asks for CDC there is
    warned about at the next discover; the file with notes loads again."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE keyed (id int PRIMARY KEY, v text);"
                     "CREATE TABLE bare (v text, n int);"
                     "CREATE TABLE full_ri (v text); ALTER TABLE full_ri REPLICA IDENTITY FULL;"
                     "CREATE TABLE idx_ri (u int NOT NULL, v text);"
                     "CREATE UNIQUE INDEX idx_ri_u ON idx_ri (u);"
                     "ALTER TABLE idx_ri REPLICA IDENTITY USING INDEX idx_ri_u;"
                     "CREATE TABLE nothing_ri (id int PRIMARY KEY, v text);"
                     "ALTER TABLE nothing_ri REPLICA IDENTITY NOTHING;"
                     "INSERT INTO bare VALUES ('b', 1), ('c', 2)")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.write_source(pg, default_mode="full_refresh_cdc")
    proc = fe.run("discover", "--source", str(fe.source), "--output", str(fe.streams))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"discover: wrote {fe.streams}\n"
    doc = json.loads(fe.streams.read_text())
    found = {s["stream"]["name"]: s["stream"] for s in doc["streams"]}
    every = ["full_refresh", "full_refresh_cdc", "cdc_only", "incremental"]
    for name in ("keyed", "full_ri", "idx_ri"):
        assert found[name]["supported_sync_modes"] == every, found[name]
        assert "notes" not in found[name], found[name]
    for name in ("bare", "nothing_ri"):
        assert found[name]["supported_sync_modes"] == ["full_refresh", "incremental"], found[name]
        notes = found[name]["notes"]
        assert len(notes) == 1 and notes[0].startswith(
            "full_refresh_cdc and cdc_only are not supported: the table has no primary key or "
            "replica identity"), notes
        assert selected(doc)[name]["sync_mode"] == "full_refresh"
    # The user asks for CDC on "bare" anyway: the next discover says sync will refuse it.
    doc["selected_streams"]["public"] = [{"stream_name": "bare", "sync_mode": "cdc"}]
    fe.streams.write_text(json.dumps(doc, indent=2))
    proc = fe.run("discover", "--source", str(fe.source), "--streams", str(fe.streams))
    assert proc.returncode == 0, proc.stderr
    assert ('stream \\"public.bare\\": sync mode full_refresh_cdc needs a primary key or replica '
            "identity") in proc.stderr, proc.stderr[-2000:]
    # The file (notes included) loads, and what discover offers works.
    doc = json.loads(fe.streams.read_text())
    doc["selected_streams"]["public"] = [{"stream_name": "bare", "sync_mode": "full_refresh"}]
    fe.streams.write_text(json.dumps(doc, indent=2))
    fe.write_destination()
    out = fe.sync()
    assert "notes" not in out.stderr, out.stderr[-2000:]
    rows = fe.catalog().load_table("e2e.bare").scan().to_arrow().select(["v", "n"]).to_pylist()
    assert sorted((r["v"], r["n"]) for r in rows) == [("b", 1), ("c", 2)]


def test_discover_offers_cdc_only_for_published_tables(pg, pg_db, firn_bin, duck, tmp_path):
    """With an existing publication (the user's), CDC can stream only the tables it carries
    (itself, or a partitioned table through its partitions): discover lists the others
    unselected, as full_refresh, without the CDC modes, and their "notes" give the ALTER
    PUBLICATION that adds them, in one warning for all. A selection that still asks for CDC
    there is warned about at the next discover; check and sync refuse it in one line; once the
    table is added, discover offers CDC and the sync streams it exactly."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute("CREATE TABLE ev (id int, at date, PRIMARY KEY (id, at)) "
                     "PARTITION BY RANGE (at); CREATE TABLE ev_2024 PARTITION OF ev FOR VALUES "
                     "FROM ('2024-01-01') TO ('2025-01-01'); "
                     "CREATE TABLE \"Odd Name\" (id int PRIMARY KEY); "
                     "CREATE PUBLICATION \"Pub O\" FOR TABLE orders, ev")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.write_source(pg, publication="Pub O", create_publication=False,
                        default_mode="full_refresh_cdc")
        proc = fe.run("discover", "--source", str(fe.source), "--output", str(fe.streams))
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(fe.streams.read_text())
        found = {s["stream"]["name"]: s["stream"] for s in doc["streams"]}
        assert set(found) == {"orders", "notes", "refunds", "ev", "Odd Name"}
        every = ["full_refresh", "full_refresh_cdc", "cdc_only", "incremental"]
        for name in ("orders", "ev"):
            assert found[name]["supported_sync_modes"] == every, found[name]
            assert "notes" not in found[name], found[name]
        sel = selected(doc)
        assert set(sel) == {"orders", "ev"}, sel
        assert all(s["sync_mode"] == "full_refresh_cdc" for s in sel.values()), sel
        for name, qualified in (("notes", '"public"."notes"'), ("refunds", '"public"."refunds"'),
                                ("Odd Name", '"public"."Odd Name"')):
            st = found[name]
            assert st["supported_sync_modes"] == ["full_refresh", "incremental"], st
            assert st["sync_mode"] == "full_refresh", st
            assert st["notes"] == [
                'full_refresh_cdc and cdc_only are not supported: the table is not in '
                'publication "Pub O", so the WAL stream does not carry its changes (add it with '
                f'ALTER PUBLICATION "Pub O" ADD TABLE {qualified} and run firn discover '
                'again)'], st
        warns = [ln for ln in proc.stderr.splitlines() if "not in publication" in ln]
        assert len(warns) == 1, proc.stderr
        assert ('3 tables not in publication \\"Pub O\\" listed unselected, without the CDC '
                'modes: public.Odd Name, public.notes, public.refunds') in warns[0], warns

        # Selected without a mode, refunds takes the one discover offered.
        doc["selected_streams"]["public"].append({"stream_name": "refunds"})
        fe.streams.write_text(json.dumps(doc, indent=2))
        proc = fe.run("discover", "--source", str(fe.source), "--streams", str(fe.streams))
        assert proc.returncode == 0 and "refuse" not in proc.stderr, proc.stderr
        doc = json.loads(fe.streams.read_text())
        assert selected(doc)["refunds"]["sync_mode"] == "full_refresh", doc["selected_streams"]
        # The user asks for CDC on it anyway (OLake's name for full_refresh_cdc).
        selected(doc)["refunds"]["sync_mode"] = "cdc"
        fe.streams.write_text(json.dumps(doc, indent=2))
        proc = fe.run("discover", "--source", str(fe.source), "--streams", str(fe.streams))
        assert proc.returncode == 0, proc.stderr
        assert ('stream \\"public.refunds\\": sync mode full_refresh_cdc needs table '
                '\\"public\\".\\"refunds\\" in publication \\"Pub O\\", which does not carry it: firn '
                'sync will refuse it (run ALTER PUBLICATION \\"Pub O\\" ADD TABLE '
                '\\"public\\".\\"refunds\\", or choose full_refresh or incremental)') in proc.stderr, \
            proc.stderr[-2000:]
        assert set(selected(json.loads(fe.streams.read_text()))) == {"orders", "ev", "refunds"}
        refused = ('firn: publication "Pub O" does not cover table "public.refunds"; run ALTER '
                   'PUBLICATION "Pub O" ADD TABLE "public"."refunds"')
        fe.write_destination()
        proc = fe.run("check", "--source", str(fe.source), "--streams", str(fe.streams),
                      "--log", "error")
        assert (proc.returncode, proc.stderr.strip()) == (3, refused), proc.stderr
        proc = fe.sync("--log", "error", check=False)
        assert (proc.returncode, proc.stderr.strip()) == (3, refused), proc.stderr
        assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0] == 0

        # Added to the publication: CDC offered, and the sync streams it value by value.
        conn.execute('ALTER PUBLICATION "Pub O" ADD TABLE refunds')
        proc = fe.run("discover", "--source", str(fe.source), "--streams", str(fe.streams))
        assert proc.returncode == 0 and "not in publication" not in proc.stderr, proc.stderr
        found = {s["stream"]["name"]: s["stream"]
                 for s in json.loads(fe.streams.read_text())["streams"]}
        assert found["refunds"]["supported_sync_modes"] == every, found["refunds"]
        assert "notes" not in found["refunds"], found["refunds"]
        conn.execute("INSERT INTO refunds VALUES (1, 1, 2.5), (2, 2, 5)")
        fe.sync()
        conn.execute("UPDATE refunds SET amount = 3 WHERE id = 1; "
                     "INSERT INTO refunds VALUES (3, 3, 7.5)")
        fe.sync()
        compare_table(fe, conn, duck, "refunds")
        conn.execute("SELECT pg_drop_replication_slot('firn_e2e')")


def test_state_and_status_after_incremental_only_run(pg, pg_db, firn_bin, tmp_path):
    """A run with only incremental streams reads no WAL: state.json shows no position (null, not
    "0/0"), and `firn status` shows "-" for it, with the cursor's run recorded."""
    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE inc (id int PRIMARY KEY, n int NOT NULL);"
                     "INSERT INTO inc SELECT g, g * 3 FROM generate_series(1, 4) g")
    fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
    fe.setup(pg, [("inc", {"sync_mode": "incremental", "cursor_field": "n"})])
    fe.sync()
    doc = json.loads(fe.state.read_text())
    assert doc["global"]["state"]["lsn"] is None, doc["global"]
    st = {s["stream"]: s["state"] for s in doc["streams"]}["inc"]
    assert "lsn" not in st and st["cursor_value"] == 12, st
    lines = status_lines(fe, "--destination", str(fe.destination))
    cols = lines["public.inc"].split()
    assert cols[2] == "incremental" and cols[4] == "-", cols
    assert "0/0" not in lines["public.inc"]


def test_relative_warehouse_is_taken_from_the_working_folder(pg, pg_db, firn_bin, tmp_path):
    """A relative warehouse ("./lake/../warehouse", "." and ".." segments included) lands in the
    folder firn runs in, not next to destination.json; the default catalog file lies in it."""
    from pyiceberg.catalog.sql import SqlCatalog

    with pg.connect(dbname=pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE rel (id int PRIMARY KEY, v text);"
                     "INSERT INTO rel VALUES (1, 'a'), (2, 'b')")
    fe = FirnEnv(firn_bin, tmp_path / "conf", pg_db)
    fe.setup(pg, [("rel", {"sync_mode": "full_refresh"})])
    fe.destination.write_text(json.dumps({"catalog": {"type": "sql",
                                                      "warehouse": "./lake/../warehouse"},
                                          "namespace": "e2e"}))
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([str(firn_bin), "sync", *fe.sync_args], capture_output=True, text=True,
                          timeout=120, env=fe.env(), cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (fe.root / "warehouse").exists() and not (work / "lake").exists()
    wh = work / "warehouse"
    assert (wh / "firn_catalog.db").is_file()
    cat = SqlCatalog("firn", uri=f"sqlite:///{wh / 'firn_catalog.db'}", warehouse=f"file://{wh}")
    tbl = cat.load_table("e2e.rel")
    assert tbl.location() == f"file://{wh}/e2e/rel"
    rows = tbl.scan().to_arrow().select(["id", "v"]).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "b")]


def test_follow_with_nothing_to_follow_says_so(pg, pg_db, firn_bin, tmp_path):
    """Issue 24 item 11: `--follow` with full_refresh streams only copies them, says there is
    nothing to follow and exits 0 (it does not end silently as if it had followed)."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE f (id int PRIMARY KEY, v text); "
                     "INSERT INTO f VALUES (1, 'a'), (2, 'b')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, [("f", {"sync_mode": "full_refresh"})])
        proc = fe.run("sync", *fe.sync_args, "--follow", "--log", "warn", timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        warns = [ln for ln in proc.stderr.splitlines() if "nothing to follow" in ln]
        assert len(warns) == 1 and "level=warn" in warns[0], proc.stderr
        assert "full_refresh_cdc" in warns[0], warns[0]
        rows = fe.pyiceberg_arrow("f").to_pylist()
        assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "b")]
        # with a CDC stream it follows and says nothing of the kind
        fe.setup(pg, ["f"])
        follow = fe.start_follow()
        try:
            log = fe.root / "follow.log"
            wait_for(lambda: b"replication connection open" in log.read_bytes(), 60,
                     what="firn to stream")
            assert stop_process(follow) == 0
            assert b"nothing to follow" not in log.read_bytes()
        finally:
            if follow.poll() is None:
                follow.kill()
