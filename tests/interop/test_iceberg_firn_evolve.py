# SPDX-License-Identifier: Apache-2.0
"""A table firn syncs while its source evolves through several schemas between `firn sync`
runs (ADD COLUMN, int -> bigint on the key, numeric(10,2) -> numeric(12,2), DROP COLUMN), with
changes both before and after each ALTER waiting in the slot, partitioned by day and bucket.
pyiceberg, DuckDB and Spark must read every file, old ones included: columns a file lacks read
as null, promoted values are exact, a dropped column keeps its old values and is null in rows
written after the drop."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from firnsync import check_partitions, check_summary_against_manifests, snapshot_chain
from sparkutil import assert_readers_agree, canon_rows, duckdb_rows, pyiceberg_rows

pytestmark = pytest.mark.spark

STREAMS = [{"stream_name": "events", "partition": ["day(created_at)", "bucket(8, id)"]}]
SETUP = [
    """CREATE TABLE events (id int PRIMARY KEY, created_at timestamptz NOT NULL,
       price numeric(10,2), qty int, label text, legacy text NOT NULL DEFAULT 'L')""",
    """INSERT INTO events SELECT g, timestamptz '2024-07-01 00:00+00' + g * interval '9 hours',
       g * 1.25, g * 10, 'ev-' || g, 'legacy-' || g FROM generate_series(1, 30) g""",
]


class Expect:
    """The rows every reader must return, kept beside the source: the source's current rows
    plus, for a dropped column, the values rows written before the drop still carry."""

    def __init__(self, job):
        self.job = job
        self.dropped: dict[str, dict] = {}  # column -> {id: value in the table}

    def rows(self, cols):
        live = [c for c in cols if c not in self.dropped]
        src = self.job.source_raw(f"SELECT {', '.join(live)} FROM events")
        out = []
        for r in src:
            row = dict(zip(live, r))
            for c, values in self.dropped.items():
                row[c] = values.get(row["id"])
            out.append(tuple(row[c] for c in cols))
        return out

    def drop(self, column, changed_after):
        """Remembers a column's values before it is dropped; rows in changed_after are written
        again after the drop (null then)."""
        values = dict(self.job.source_raw(f"SELECT id, {column} FROM events"))
        for k in changed_after:
            values.pop(k, None)
        self.dropped[column] = values


def check(job, expect, cols, spark=None):
    loc, table = job.loc, job.table("events")
    want = canon_rows(expect.rows(cols))
    got = pyiceberg_rows(loc, table, cols)
    assert got == want, f"pyiceberg: {[r for r in got if r not in want][:3]} vs " \
                        f"{[r for r in want if r not in got][:3]}"
    assert duckdb_rows(loc, table, cols) == want, "duckdb"
    if spark is not None:
        assert_readers_agree(spark, loc, table, expect.rows(cols), cols, equality_deletes=False)
    tbl = loc.pyiceberg().load_table(table)
    for snap in snapshot_chain(tbl):
        check_summary_against_manifests(tbl, snap)
    check_partitions(tbl, ["created_at", "id"])
    return tbl


def fields(tbl):
    return {f.name: (f.field_id, str(f.field_type), f.required) for f in tbl.schema().fields}


def test_schema_evolution_between_syncs(firn_job, spark):
    job = firn_job(STREAMS, setup=SETUP)
    expect = Expect(job)
    job.sync()
    cols = ["id", "created_at", "price", "qty", "label", "legacy"]
    tbl = check(job, expect, cols)
    v1 = fields(tbl)
    assert v1["id"] == (1, "int", True) and v1["price"] == (3, "decimal(10, 2)", False)
    assert v1["legacy"] == (6, "string", True)

    # ---- ADD COLUMN (changes before and after it wait in the slot) -------------------------
    job.sql("UPDATE events SET label = 'pre-add' WHERE id = 1")
    job.sql("ALTER TABLE events ADD COLUMN note text")
    job.sql("INSERT INTO events VALUES (31, timestamptz '2024-07-20 10:00+00', 31.25, 310, "
            "'ev-31', 'legacy-31', 'note-31')",
            "UPDATE events SET note = 'noted', price = price + 100 WHERE id IN (2, 3)")
    job.sync()
    cols.append("note")
    tbl = check(job, expect, cols)
    v2 = fields(tbl)
    assert v2["note"][1:] == ("string", False) and v2["note"][0] > max(f[0] for f in v1.values())
    assert tbl.schema().schema_id > 0

    # ---- promotions: int -> bigint on the key and on qty, numeric(10,2) -> numeric(12,2) ---
    job.sql("UPDATE events SET qty = qty + 1 WHERE id = 4")
    job.sql("ALTER TABLE events ALTER COLUMN id TYPE bigint, ALTER COLUMN qty TYPE bigint, "
            "ALTER COLUMN price TYPE numeric(12,2)")
    job.sql("INSERT INTO events VALUES (3000000000, timestamptz '2024-07-21 01:00+00', "
            "9999999999.99, 5000000000, 'big', 'legacy-big', NULL)",
            "UPDATE events SET price = 1234567890.12, qty = 4000000000 WHERE id IN (5, 31)",
            "DELETE FROM events WHERE id IN (6, 2)")
    job.sync()
    tbl = check(job, expect, cols)
    v3 = fields(tbl)
    assert v3["id"] == (1, "long", True) and v3["qty"][:2] == (4, "long")
    assert v3["price"] == (3, "decimal(12, 2)", False)

    # ---- DROP COLUMN (a NOT NULL one): kept in Iceberg, null in rows written afterwards -----
    job.sql("UPDATE events SET label = 'pre-drop' WHERE id = 7")
    # 7 changed before the drop, streamed after it: the dropped value is not written (null)
    expect.drop("legacy", changed_after={7, 8, 32, 9})
    job.sql("ALTER TABLE events DROP COLUMN legacy")
    job.sql("INSERT INTO events VALUES (32, timestamptz '2024-07-22 02:00+00', 32.00, 320, "
            "'ev-32', NULL)",
            "UPDATE events SET label = 'post-drop' WHERE id IN (8, 9)")
    job.sync()
    tbl = check(job, expect, cols, spark)
    v4 = fields(tbl)
    assert v4["legacy"][:2] == (6, "string") and not v4["legacy"][2], v4["legacy"]
    assert len(tbl.schemas()) >= 4
