# SPDX-License-Identifier: Apache-2.0
"""firn sync end to end (issue 7, check 1): PostgreSQL -> Iceberg over the type corpus and a mixed
workload (backfill, then CDC with inserts, updates incl. key changes, deletes, a row inserted,
updated and deleted in one transaction, TRUNCATE, TOAST values > 8 KB updated and left untouched
under REPLICA IDENTITY DEFAULT and FULL, a large transaction that arrives streamed), then a
catch-up `firn sync`. Each table is compared with the source value by value: the source read
with psycopg (text forms parsed per docs/type-mapping.md), the table read with pyiceberg AND
with DuckDB's iceberg_scan; full rows and a full-row hash. Tables with a primary key are
upserted (position deletes); the table without one is an append-mode change log whose _firn_op
sequence is checked."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from firnutil import META_COLUMNS, FirnEnv, compare_table, stop_process, wait_for

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "type_corpus.sql"

# The Iceberg type of every corpus column (docs/type-mapping.md), as pyiceberg prints it.
CORPUS_TYPES = {
    "id": "int", "c_bool": "boolean", "c_int2": "int", "c_int4": "int", "c_int8": "long",
    "c_float4": "float", "c_float8": "double", "c_num_10_2": "decimal(10, 2)",
    "c_num_38_10": "decimal(38, 10)", "c_num_18_0": "decimal(18, 0)", "c_num": "string",
    "c_num_50_5": "string", "c_money": "decimal(19, 2)", "c_text": "string",
    "c_varchar": "string", "c_char": "string", "c_name": "string", "c_citext": "string",
    "c_char1": "string", "c_bytea": "binary", "c_uuid": "uuid", "c_date": "date",
    "c_time": "time", "c_timetz": "string", "c_ts": "timestamp", "c_tstz": "timestamptz",
    "c_ts3": "timestamp",
    "c_interval": "struct<months: int, days: int, microseconds: long>",
    "c_json": "string", "c_jsonb": "string", "c_xml": "string", "c_inet": "string",
    "c_cidr": "string", "c_macaddr": "string", "c_macaddr8": "string", "c_bit": "string",
    "c_varbit": "string", "c_enum": "string", "c_posint": "int", "c_email": "string",
    "c_price": "decimal(12, 3)", "c_oid": "long", "c_tsvector": "string",
    "c_tsquery": "string", "c_point": "string", "c_line": "string", "c_lseg": "string",
    "c_box": "string", "c_path": "string", "c_polygon": "string", "c_circle": "string",
    "c_pair": "string", "c_int4range": "string", "c_numrange": "string",
    "c_tstzrange": "string", "c_datemultirange": "string", "c_pg_lsn": "string",
    "c_int4_arr": "list<int>", "c_int2d": "list<list<int>>", "c_text_arr": "list<string>",
    "c_num_arr": "list<decimal(10, 2)>", "c_numx_arr": "list<string>",
    "c_tstz_arr": "list<timestamptz>", "c_uuid_arr": "list<uuid>",
    "c_bytea_arr": "list<binary>", "c_bool_arr": "list<boolean>",
    "c_float8_arr": "list<double>", "c_date_arr": "list<date>",
    "c_interval_arr": "list<struct<months: int, days: int, microseconds: long>>",
    "c_inet_arr": "list<string>", "c_enum_arr": "list<string>", "c_jsonb_arr": "list<string>",
    "c_posint_arr": "list<int>", "c_box_arr": "list<string>",
    "c_money_arr": "list<decimal(19, 2)>", "c_text2d": "list<list<string>>",
    "c_int2vec": "list<int>", "c_oidvec": "list<long>", "c_int2vec_arr": "string",
    "c_semi_arr": "list<string>",
}


def type_name(t) -> str:
    from pyiceberg import types as it

    if isinstance(t, it.ListType):
        return f"list<{type_name(t.element_type)}>"
    if isinstance(t, it.StructType):
        return "struct<" + ", ".join(f"{f.name}: {type_name(f.field_type)}"
                                     for f in t.fields) + ">"
    return str(t)


def load_corpus(conn):
    conn.execute(CORPUS.read_text())


def test_type_corpus_backfill_and_cdc(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        load_corpus(conn)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["firn_type_corpus"])
        fe.sync()
        ice = fe.catalog().load_table("e2e.firn_type_corpus")
        got = {f.name: type_name(f.field_type) for f in ice.schema().fields
               if f.name not in META_COLUMNS}
        assert got == CORPUS_TYPES
        compare_table(fe, conn, duck, "firn_type_corpus")

        # CDC over every value of the corpus: copies of each row (inserts), updates of whole
        # rows from other rows, a key change and deletes, through the text decoder.
        conn.execute("INSERT INTO firn_type_corpus SELECT id + 100, c_bool, c_int2, c_int4, "
                     "c_int8, c_float4, c_float8, c_num_10_2, c_num_38_10, c_num_18_0, c_num, "
                     "c_num_50_5, c_money, c_text, c_varchar, c_char, c_name, c_citext, "
                     "c_char1, c_bytea, c_uuid, c_date, c_time, c_timetz, c_ts, c_tstz, c_ts3, "
                     "c_interval, c_json, c_jsonb, c_xml, c_inet, c_cidr, c_macaddr, "
                     "c_macaddr8, c_bit, c_varbit, c_enum, c_posint, c_email, c_price, c_oid, "
                     "c_tsvector, c_tsquery, c_point, c_line, c_lseg, c_box, c_path, "
                     "c_polygon, c_circle, c_pair, c_int4range, c_numrange, c_tstzrange, "
                     "c_datemultirange, c_pg_lsn, c_int4_arr, c_int2d, c_text_arr, c_num_arr, "
                     "c_numx_arr, c_tstz_arr, c_uuid_arr, c_bytea_arr, c_bool_arr, "
                     "c_float8_arr, c_date_arr, c_interval_arr, c_inet_arr, c_enum_arr, "
                     "c_jsonb_arr, c_posint_arr, c_box_arr, c_money_arr, c_text2d, c_int2vec, "
                     "c_oidvec, c_int2vec_arr, c_semi_arr FROM firn_type_corpus")
        cols = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'firn_type_corpus'::regclass "
            "AND attnum > 1 AND NOT attisdropped ORDER BY attnum").fetchall()]
        sets = ", ".join(f"{c} = s.{c}" for c in cols)
        conn.execute(f"UPDATE firn_type_corpus t SET {sets} FROM firn_type_corpus s "
                     "WHERE t.id = 101 AND s.id = 4")
        conn.execute(f"UPDATE firn_type_corpus t SET {sets} FROM firn_type_corpus s "
                     "WHERE t.id = 3 AND s.id = 1")
        conn.execute("UPDATE firn_type_corpus SET id = 1000 WHERE id = 105")
        conn.execute("DELETE FROM firn_type_corpus WHERE id IN (2, 106)")
        fe.sync()
        compare_table(fe, conn, duck, "firn_type_corpus")


MIXED_SCHEMA = """
CREATE TABLE accounts (id int4 PRIMARY KEY, balance numeric(12, 2) NOT NULL, note text,
                       doc text, updated timestamptz DEFAULT now());
CREATE TABLE docs_full (id int8 PRIMARY KEY, title text, body text, tags text[]);
ALTER TABLE docs_full REPLICA IDENTITY FULL;
CREATE TABLE scratch (k text PRIMARY KEY, v int4);
CREATE TABLE events (id int4, v text, at date);
ALTER TABLE events REPLICA IDENTITY FULL;
CREATE TABLE audit (at int4, what text);
ALTER TABLE audit REPLICA IDENTITY FULL;
CREATE FUNCTION big(seed int) RETURNS text LANGUAGE sql AS
  $$ SELECT string_agg(md5((seed * 1000 + g)::text), '') FROM generate_series(1, 300) g $$;
INSERT INTO accounts (id, balance, note, doc)
  SELECT g, g * 1.5, 'n' || g, CASE WHEN g % 10 = 0 OR g BETWEEN 10 AND 40 THEN big(g) END
  FROM generate_series(1, 200) g;
INSERT INTO docs_full SELECT g, 't' || g, big(g + 500), ARRAY['x', g::text]
  FROM generate_series(1, 20) g;
INSERT INTO scratch SELECT 'k' || g, g FROM generate_series(1, 50) g;
INSERT INTO events VALUES (1, 'a', '2024-01-01'), (2, 'b', NULL), (3, 'c', '2024-01-03');
"""

# The change workload, one transaction per entry.
MIXED_CHANGES = [
    # inserts, updates and deletes
    "INSERT INTO accounts (id, balance, note) SELECT g, g, 'new' FROM generate_series(201, 260) g",
    "UPDATE accounts SET balance = balance + 1, note = note || '+' WHERE id % 7 = 0",
    "DELETE FROM accounts WHERE id IN (1, 2, 250)",
    # key changes, one of them leaving a TOAST value untouched
    "UPDATE accounts SET id = id + 10000 WHERE id IN (3, 4, 22)",
    # inserted, updated and deleted in one transaction; and a key reused after a delete
    "BEGIN; INSERT INTO accounts VALUES (9999, 1, 'tmp'); UPDATE accounts SET balance = 2 "
    "WHERE id = 9999; DELETE FROM accounts WHERE id = 9999; DELETE FROM accounts WHERE id = 5; "
    "INSERT INTO accounts (id, balance, note) VALUES (5, 55, 'again'); COMMIT",
    # TOAST values left untouched (REPLICA IDENTITY DEFAULT and FULL) and replaced
    "UPDATE accounts SET note = 'toast kept' WHERE id BETWEEN 10 AND 20",
    "UPDATE docs_full SET title = 'title only' WHERE id <= 5",
    "UPDATE accounts SET doc = big(7777) WHERE id = 21",
    "UPDATE docs_full SET body = big(8888), tags = '{}' WHERE id = 6",
    "BEGIN; UPDATE accounts SET note = 'twice 1' WHERE id = 30; "
    "UPDATE accounts SET balance = -1 WHERE id = 30; COMMIT",
    "BEGIN; UPDATE accounts SET note = 'then replaced' WHERE id = 31; "
    "UPDATE accounts SET doc = 'short now' WHERE id = 31; COMMIT",
    "UPDATE accounts SET note = 'kept, then deleted' WHERE id = 32",
    "DELETE FROM accounts WHERE id = 32",
    "DELETE FROM docs_full WHERE id = 7",
    # TRUNCATE: alone, with rows after it in its transaction, and after other tables' rows
    "TRUNCATE scratch",
    "INSERT INTO scratch VALUES ('after', 1)",
    "BEGIN; INSERT INTO accounts (id, balance) VALUES (300, 3); TRUNCATE scratch; "
    "INSERT INTO scratch VALUES ('same txn', 2), ('k1', 3); COMMIT",
    "UPDATE scratch SET v = v + 10",
    # a large transaction, streamed with logical_decoding_work_mem = 64kB
    "BEGIN; INSERT INTO accounts (id, balance, note) SELECT g, g / 3.0, repeat('L', 100) "
    "FROM generate_series(1000, 3999) g; UPDATE accounts SET note = 'big txn' "
    "WHERE id BETWEEN 1000 AND 1499; DELETE FROM accounts WHERE id BETWEEN 3900 AND 3999; COMMIT",
    # the append-mode change log
    "INSERT INTO events VALUES (4, 'd', '2024-01-04')",
    "UPDATE events SET v = 'bb' WHERE id = 2",
    "DELETE FROM events WHERE id = 3",
    "BEGIN; INSERT INTO events VALUES (5, 'e', NULL); UPDATE events SET v = 'ee' WHERE id = 5; "
    "DELETE FROM events WHERE id = 5; COMMIT",
    # a table empty at the initial copy
    "INSERT INTO audit VALUES (1, 'one'), (2, 'two')",
]

# What the events change log must hold afterwards: one group per source transaction, in commit
# order, each a multiset of (_firn_op, id, v).
EVENTS_LOG = [
    [("r", 1, "a"), ("r", 2, "b"), ("r", 3, "c")],
    [("c", 4, "d")],
    [("u", 2, "bb")],
    [("d", 3, "c")],
    [("c", 5, "e"), ("u", 5, "ee"), ("d", 5, "ee")],
]

MIXED_MORE = [
    "UPDATE accounts SET balance = 0 WHERE id BETWEEN 1000 AND 1100",
    "DELETE FROM accounts WHERE id BETWEEN 1101 AND 1200",
    "UPDATE accounts SET note = 'second run' WHERE id BETWEEN 10 AND 12",
    "UPDATE accounts SET id = 3 WHERE id = 10003",
    "INSERT INTO scratch VALUES ('k2', 4)",
    "INSERT INTO audit VALUES (3, 'three')",
]


def events_log(fe: FirnEnv, table: str = "events",
               columns: tuple[str, str] = ("id", "v")) -> list[list[tuple]]:
    """The change log of an append-mode table: (_firn_op, *columns) grouped by source
    transaction (_firn_lsn), in commit order."""
    arrow = fe.pyiceberg_arrow(table)
    rows = sorted(zip(arrow.column("_firn_lsn").to_pylist(), arrow.column("_firn_op").to_pylist(),
                      *(arrow.column(c).to_pylist() for c in columns)))
    groups: dict[int, list] = {}
    for lsn, *rest in rows:
        groups.setdefault(lsn, []).append(tuple(rest))
    return [sorted(g) for _, g in sorted(groups.items())]


@pytest.mark.parametrize("delete_mode, version", [("position", 2), ("deletion_vector", 3)])
def test_mixed_workload_backfill_cdc_catch_up(pg, pg_db, firn_bin, duck, tmp_path, delete_mode,
                                              version):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(MIXED_SCHEMA)
        conn.execute(f'ALTER DATABASE "{pg_db}" SET logical_decoding_work_mem = \'64kB\'')
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        # events and audit are change logs: append mode is asked for (a keyless table with
        # REPLICA IDENTITY FULL is otherwise a multiset of rows: test_engine_multiset.py)
        fe.setup(pg, ["accounts", "docs_full", "scratch", ("events", {"append_mode": True}),
                      ("audit", {"append_mode": True})],
                 destination={"delete_mode": delete_mode})
        fe.sync()
        assert fe.catalog().load_table("e2e.accounts").metadata.format_version == version
        tables = {"accounts": 0, "docs_full": 0, "scratch": 0}
        for t in tables:
            compare_table(fe, conn, duck, t)
        for stmt in MIXED_CHANGES:
            conn.execute(stmt)
        fe.sync()
        # Slot statistics reach the view a moment after the walsender reports them.
        wait_for(lambda: conn.execute("SELECT stream_txns FROM pg_stat_replication_slots "
                                      "WHERE slot_name = 'firn_e2e'").fetchone()[0] > 0, 15,
                 interval=0.5, what="the large transaction to be streamed (stream_txns > 0)")
        for t in tables:
            compare_table(fe, conn, duck, t)
        assert events_log(fe) == [sorted(g) for g in EVENTS_LOG]
        audit = ("at", "what")
        assert events_log(fe, "audit", audit) == [[("c", 1, "one"), ("c", 2, "two")]]
        ice = fe.catalog().load_table("e2e.events")
        assert ice.schema().identifier_field_ids == []
        assert ice.properties.get("firn.mode") == "append"
        assert fe.catalog().load_table("e2e.accounts").properties.get("firn.mode") == "upsert"

        # A second catch-up run: the key index is rebuilt from data and delete files.
        for stmt in MIXED_MORE:
            conn.execute(stmt)
        fe.sync()
        for t in tables:
            compare_table(fe, conn, duck, t)
        assert events_log(fe) == [sorted(g) for g in EVENTS_LOG]
        # The empty table's initial copy stays done: not copied again, its log intact.
        assert events_log(fe, "audit", audit) == [[("c", 1, "one"), ("c", 2, "two")],
                                                  [("c", 3, "three")]]


def test_unchanged_toast_of_a_row_deleted_since(pg, pg_db, firn_bin, duck, tmp_path):
    """An UPDATE leaving a TOAST value untouched (REPLICA IDENTITY DEFAULT) of a row deleted or
    re-keyed before firn reads it: the value cannot be fetched any more; with a commit between
    that change and the delete, firn must neither write a null into the NOT NULL column (which
    stopped every run at that change) nor lose the later state."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE d (id int PRIMARY KEY, note text, body text NOT NULL); "
                     "INSERT INTO d SELECT g, 'n', (SELECT string_agg(md5(g::text || h), '') "
                     "FROM generate_series(1, 300) h) FROM generate_series(1, 4) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["d"], interval_s=0.001)  # a commit after every source transaction
        fe.sync()
        for stmt in ("UPDATE d SET note = 'x' WHERE id = 1", "DELETE FROM d WHERE id = 1",
                     "UPDATE d SET note = 'y' WHERE id = 2", "UPDATE d SET id = 20 WHERE id = 2",
                     "UPDATE d SET note = 'z' WHERE id = 3"):
            conn.execute(stmt)
        fe.sync()
        compare_table(fe, conn, duck, "d")


def test_column_added_while_following(pg, pg_db, firn_bin, duck, tmp_path):
    """ADD COLUMN and a retype while `firn sync --follow` streams: the run takes both in-stream
    (the table schema evolves, the run goes on; tests/interop/test_engine_schema_live.py has
    more), and the table equals the source."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, v text); "
                     "INSERT INTO s SELECT g, 'v' FROM generate_series(1, 10) g")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s"], interval_s=0.2)
        fe.sync()
        proc = fe.start_follow()
        wait_for(lambda: b"replication connection open" in (fe.root / "follow.log").read_bytes(),
                 60, what="firn to stream")
        conn.execute("INSERT INTO s VALUES (11, 'before')")
        conn.execute("ALTER TABLE s ADD COLUMN extra int")
        conn.execute("UPDATE s SET extra = 7 WHERE id < 3")
        conn.execute("ALTER TABLE s ALTER COLUMN v TYPE varchar(20)")
        conn.execute("INSERT INTO s VALUES (12, 'after', 9)")
        wait_for(lambda: 12 in fe.pyiceberg_arrow("s").column("id").to_pylist(), 60,
                 what="the row after the ALTERs")
        log = (fe.root / "follow.log").read_text()
        assert proc.poll() is None, log[-2000:]
        assert stop_process(proc) == 0
        assert 'column \\"extra\\" added as integer while streaming' in \
            (fe.root / "follow.log").read_text()
        compare_table(fe, conn, duck, "s")


@pytest.mark.parametrize("version", [2, 3])
def test_column_added_with_default_fills_existing_rows(pg, pg_db, firn_bin, duck, tmp_path,
                                                        version):
    """ADD COLUMN ... DEFAULT gives the rows already there a value with no change in the WAL
    (a constant is kept as attmissingval, a volatile default rewrites the table): the next run
    copies the table again in a new snapshot and the table equals the source, for a constant
    and a volatile default, after a catch-up run and after a follow run that stopped at the
    ALTER with changes from before it still uncommitted (those are in the copy: not replayed
    over it with nulls)."""
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, v text); "
                     "INSERT INTO s SELECT g, 'v' FROM generate_series(1, 5) g; "
                     "CREATE TABLE o (id int PRIMARY KEY, v text); INSERT INTO o VALUES (1, 'o')")
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)
        fe.setup(pg, ["s", "o"], destination={"format_version": version})
        fe.sync()
        conn.execute("ALTER TABLE s ADD COLUMN extra int DEFAULT 5")
        conn.execute("INSERT INTO s VALUES (6, 'new')")
        proc = fe.sync()
        assert "with a DEFAULT" in proc.stderr, proc.stderr[-2000:]
        compare_table(fe, conn, duck, "s")
        conn.execute("ALTER TABLE s ADD COLUMN tok text DEFAULT md5(random()::text)")
        conn.execute("UPDATE s SET v = 'after' WHERE id = 2")
        fe.sync()
        compare_table(fe, conn, duck, "s")
        fe.sync()  # nothing more: no copy
        compare_table(fe, conn, duck, "s")
        # Another table's change committed after its copy: the slot is in use from here on (not
        # dropped and made again for the next copy), so the next copy of s is taken outside the
        # slot's snapshot and the slot's older changes of s are replayed after it.
        conn.execute("UPDATE o SET v = 'later'")
        fe.sync()

        # A follow run that commits rarely: changes made before the ALTER are still buffered
        # when it stops at the new column.
        fe.write_destination(3600)
        proc = fe.start_follow()
        wait_for(lambda: b"replication connection open" in (fe.root / "follow.log").read_bytes(),
                 60, what="firn to stream")
        conn.execute("UPDATE s SET v = 'pre-alter' WHERE id IN (1, 3)")
        conn.execute("INSERT INTO s VALUES (7, 'pre-alter')")
        time.sleep(1)
        conn.execute("ALTER TABLE s ADD COLUMN flag boolean NOT NULL DEFAULT true")
        conn.execute("UPDATE s SET v = 'post-alter' WHERE id = 3")
        assert proc.wait(timeout=60) == 3
        fe.sync()
        rows = conn.execute("SELECT id, flag FROM s ORDER BY id").fetchall()
        assert all(f is True for _, f in rows), rows
        compare_table(fe, conn, duck, "s")
        compare_table(fe, conn, duck, "o")
