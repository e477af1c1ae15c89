# SPDX-License-Identifier: Apache-2.0
"""Incremental sync by a cursor column: each run copies the rows above the committed cursor,
upserted by key (or appended without one), and the table equals the source afterwards."""

import json

from sparkutil import canon_rows

COLS = "id, v, amount, updated_at"


def table_rows(job, name, cols=COLS):
    tbl = job.loc.pyiceberg().load_table(job.table(name))
    arrow = tbl.scan(selected_fields=tuple(c.strip() for c in cols.split(","))).to_arrow()
    return canon_rows([tuple(r.values()) for r in arrow.to_pylist()]), tbl


def cursor_summary(tbl):
    """The summary of the newest snapshot an incremental run committed (a compaction may
    follow it)."""
    snaps = {s.snapshot_id: s for s in tbl.snapshots()}
    cur = tbl.current_snapshot()
    while cur is not None and "firn.cursor-field" not in cur.summary.additional_properties:
        cur = snaps.get(cur.parent_snapshot_id)
    return cur.summary.additional_properties


def test_incremental_upsert_follows_cursor(firn_job):
    job = firn_job(
        [{"stream_name": "ev", "sync_mode": "incremental", "cursor_field": "updated_at"}],
        mode="incremental",
        setup=("CREATE TABLE ev (id int PRIMARY KEY, v text, amount numeric(10,2), "
               "updated_at timestamptz NOT NULL)",
               "INSERT INTO ev SELECT g, 'v' || g, g * 1.25, "
               "'2024-01-01'::timestamptz + g * interval '1 hour' FROM generate_series(1, 50) g"))
    job.sync()
    rows, tbl = table_rows(job, "ev")
    assert rows == job.source_rows(f"SELECT {COLS} FROM ev")
    first = tbl.current_snapshot()
    assert first.summary.additional_properties["firn.cursor"] == "2024-01-03 02:00:00+00"

    # Rows changed with a newer cursor are re-read and replace their earlier image; a row
    # changed without moving the cursor is (by design) not seen.
    job.sql("UPDATE ev SET v = 'changed', updated_at = '2030-01-01' WHERE id IN (3, 4)",
            "INSERT INTO ev VALUES (51, 'new', 9.99, '2030-01-02')")
    job.sync()
    rows, tbl = table_rows(job, "ev")
    assert rows == job.source_rows(f"SELECT {COLS} FROM ev")
    snap = tbl.current_snapshot()
    assert snap.summary.additional_properties["firn.cursor"] == "2030-01-02 00:00:00+00"
    assert snap.summary.additional_properties.get("added-position-delete-files") == "1"

    # Nothing new: no commit at all.
    job.sync()
    _, tbl = table_rows(job, "ev")
    assert tbl.current_snapshot().snapshot_id == snap.snapshot_id


def test_incremental_without_key_appends(firn_job):
    job = firn_job(
        [{"stream_name": "log", "sync_mode": "incremental", "cursor_field": "seq"}],
        mode="incremental",
        setup=("CREATE TABLE log (seq bigint NOT NULL, msg text)",
               "INSERT INTO log SELECT g, 'm' || g FROM generate_series(1, 20) g"))
    job.sync()
    job.sql("INSERT INTO log SELECT g, 'm' || g FROM generate_series(21, 30) g")
    job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("log"))
    got = sorted((r["seq"], r["msg"], r["_firn_op"]) for r in tbl.scan().to_arrow().to_pylist())
    assert got == [(g, f"m{g}", "r") for g in range(1, 31)]


def test_incremental_null_cursor_rows_keyed(firn_job):
    """NULL cursors: the first run copies them, and a keyed table reads them again on every run
    (upserted), so a NULL-cursor row inserted or changed later is not lost."""
    job = firn_job(
        [{"stream_name": "ev", "sync_mode": "incremental", "cursor_field": "updated_at"}],
        mode="incremental",
        setup=("CREATE TABLE ev (id int PRIMARY KEY, v text, amount numeric(10,2), "
               "updated_at timestamptz)",
               "INSERT INTO ev SELECT g, 'v' || g, g, CASE WHEN g % 3 = 0 THEN NULL ELSE "
               "'2024-01-01'::timestamptz + g * interval '1 hour' END "
               "FROM generate_series(1, 12) g"))
    job.sync()
    rows, _ = table_rows(job, "ev")
    assert rows == job.source_rows(f"SELECT {COLS} FROM ev")
    job.sql("INSERT INTO ev VALUES (100, 'late', 1, NULL)",
            "UPDATE ev SET v = 'changed' WHERE id = 3")
    job.sync()
    rows, _ = table_rows(job, "ev")
    assert rows == job.source_rows(f"SELECT {COLS} FROM ev")
    assert (100, "late") in {(r[0], r[1]) for r in rows}


def test_incremental_null_cursor_rows_keyless_warn(firn_job):
    """A keyless table copies NULL-cursor rows in its first run and then warns with their
    count (reading them again would append them once more)."""
    job = firn_job(
        [{"stream_name": "log", "sync_mode": "incremental", "cursor_field": "seq"}],
        mode="incremental",
        setup=("CREATE TABLE log (seq bigint, msg text)",
               "INSERT INTO log VALUES (1, 'a'), (NULL, 'n1'), (2, 'b'), (NULL, 'n2')"))
    job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("log"))
    got = sorted((r["seq"] or 0, r["msg"]) for r in tbl.scan().to_arrow().to_pylist())
    assert got == [(0, "n1"), (0, "n2"), (1, "a"), (2, "b")]
    job.sql("INSERT INTO log VALUES (3, 'c'), (NULL, 'n3')")
    proc = job.sync()
    assert "3 rows have a NULL cursor" in proc.stderr
    tbl = job.loc.pyiceberg().load_table(job.table("log"))
    got = sorted((r["seq"] or 0, r["msg"]) for r in tbl.scan().to_arrow().to_pylist())
    assert got == [(0, "n1"), (0, "n2"), (1, "a"), (2, "b"), (3, "c")]


def test_incremental_rows_tied_at_the_last_cursor(firn_job):
    """Rows that share the last cursor value but arrive after it was read are copied by the
    next run (>= on the saved value when the count of rows at it changed), without duplicates;
    a run with nothing new commits nothing."""
    job = firn_job(
        [{"stream_name": "ev", "sync_mode": "incremental", "cursor_field": "updated_at"}],
        mode="incremental",
        setup=("CREATE TABLE ev (id int PRIMARY KEY, v text, amount numeric(10,2), "
               "updated_at timestamptz NOT NULL)",
               "INSERT INTO ev SELECT g, 'v' || g, g, '2024-05-01 12:00:00+00' "
               "FROM generate_series(1, 5) g"))
    job.sync()
    snap = job.loc.pyiceberg().load_table(job.table("ev")).current_snapshot()
    assert snap.summary.additional_properties["firn.cursor-count"] == "5"
    job.sql("INSERT INTO ev SELECT g, 'v' || g, g, '2024-05-01 12:00:00+00' "
            "FROM generate_series(6, 8) g")
    job.sync()
    rows, tbl = table_rows(job, "ev")
    assert rows == job.source_rows(f"SELECT {COLS} FROM ev")
    assert len(rows) == 8
    snap = tbl.current_snapshot()
    assert cursor_summary(tbl)["firn.cursor-count"] == "8"
    job.sync()
    tbl = job.loc.pyiceberg().load_table(job.table("ev"))
    assert tbl.current_snapshot().snapshot_id == snap.snapshot_id


# (type, value just below the maximum, maximum, the state's cursor_value)
CURSOR_TYPES = [
    ("int", "41", "42", 42),
    ("bigint", "9007199254740992", "9007199254740993", 9007199254740993),
    ("numeric", "12345678901234567890.123456788", "12345678901234567890.123456789",
     "12345678901234567890.123456789"),
    ("timestamp", "2024-01-01 00:00:00.123455", "2024-01-01 00:00:00.123456",
     "2024-01-01 00:00:00.123456"),
    ("timestamptz", "2024-01-01 00:00:00.123455+00", "2024-01-01 00:00:00.123456+00",
     "2024-01-01 00:00:00.123456+00"),
    ("date", "2024-02-28", "2024-02-29", "2024-02-29"),
    ("text", "abc", "abd", "abd"),
]


def test_incremental_state_cursor_round_trips(firn_job, tmp_path):
    """state.json carries cursor_field / cursor_value per stream, exactly: a run that starts
    from that state alone (a new destination) copies the rows at the maximum and none below,
    for every cursor type and the "a:b" fallback form."""
    setup = []
    streams = []
    for i, (typ, low, high, _) in enumerate(CURSOR_TYPES):
        setup += [f"CREATE TABLE c{i} (id int PRIMARY KEY, c {typ} NOT NULL)",
                  f"INSERT INTO c{i} VALUES (1, '{low}'), (2, '{high}')"]
        streams.append({"stream_name": f"c{i}", "sync_mode": "incremental", "cursor_field": "c"})
    setup += ["CREATE TABLE cf (id int PRIMARY KEY, a timestamptz, b timestamptz NOT NULL)",
              "INSERT INTO cf VALUES (1, NULL, '2024-03-01 00:00:00.5+00'), "
              "(2, '2024-03-01 00:00:00.25+00', '2020-01-01+00'), "
              "(3, NULL, '2024-03-01 00:00:00.75+00')"]
    streams.append({"stream_name": "cf", "sync_mode": "incremental", "cursor_field": "a:b"})
    job = firn_job(streams, mode="incremental", setup=setup)
    job.sync()
    state = {s["stream"]: s["state"] for s in job.state()["streams"]}
    for i, (typ, _, _, want) in enumerate(CURSOR_TYPES):
        assert state[f"c{i}"]["cursor_field"] == "c", typ
        assert state[f"c{i}"]["cursor_value"] == want, typ
        assert type(state[f"c{i}"]["cursor_value"]) is type(want), typ
    assert state["cf"]["cursor_field"] == "a:b"
    assert state["cf"]["cursor_value"] == "2024-03-01 00:00:00.75+00"

    # A second destination resumed from that state (as a state file OLake or an older firn
    # wrote: no snapshot ids): only the rows at each maximum.
    doc = job.state()
    for s in doc["streams"]:
        s["state"].pop("snapshot_id", None)
    job2 = firn_job(streams, mode="incremental", database=job.dbname, slot_suffix="_b")
    job2.workdir.mkdir(parents=True, exist_ok=True)
    (job2.workdir / "state.json").write_text(json.dumps(doc))
    job2.sync()
    for i, (typ, _, _, _) in enumerate(CURSOR_TYPES):
        tbl = job2.loc.pyiceberg().load_table(job2.table(f"c{i}"))
        assert sorted(r["id"] for r in tbl.scan().to_arrow().to_pylist()) == [2], typ
    tbl = job2.loc.pyiceberg().load_table(job2.table("cf"))
    assert sorted(r["id"] for r in tbl.scan().to_arrow().to_pylist()) == [3]


def test_incremental_resumes_from_olake_state(firn_job):
    """An OLake state file ({"<cursor column>": value}, RFC 3339 times; two keys for "a:b")
    is where the first firn run starts: rows at or above it are copied, rows below are not."""
    job = firn_job(
        [{"stream_name": "ev", "sync_mode": "incremental", "cursor_field": "updated_at"},
         {"stream_name": "fb", "sync_mode": "incremental", "cursor_field": "a:b"}],
        mode="incremental",
        setup=("CREATE TABLE ev (id int PRIMARY KEY, v text, amount numeric(10,2), "
               "updated_at timestamptz NOT NULL)",
               "INSERT INTO ev SELECT g, 'v' || g, g, '2024-01-01'::timestamptz + "
               "g * interval '1 hour' FROM generate_series(1, 10) g",
               "CREATE TABLE fb (id int PRIMARY KEY, a int, b int NOT NULL)",
               "INSERT INTO fb VALUES (1, 5, 0), (2, NULL, 7), (3, 9, 0), (4, NULL, 3), "
               "(5, 2, 0)"))
    job.workdir.mkdir(parents=True, exist_ok=True)
    olake = {"type": "STREAM", "streams": [
        {"stream": "ev", "namespace": "public", "sync_mode": "incremental",
         "state": {"chunks": [], "updated_at": "2024-01-01T05:00:00Z"}},
        {"stream": "fb", "namespace": "public", "sync_mode": "incremental",
         "state": {"b": 7, "a": 5}}]}
    (job.workdir / "state.json").write_text(json.dumps(olake))
    job.sync()
    rows, _ = table_rows(job, "ev")
    assert rows == job.source_rows(
        f"SELECT {COLS} FROM ev WHERE updated_at >= '2024-01-01 05:00:00+00'")
    tbl = job.loc.pyiceberg().load_table(job.table("fb"))
    # coalesce(a, b) >= least(5, 7): ids 1 (5), 2 (7), 3 (9)
    assert sorted(r["id"] for r in tbl.scan().to_arrow().to_pylist()) == [1, 2, 3]
    state = {s["stream"]: s["state"] for s in job.state()["streams"]}
    assert state["ev"]["cursor_field"] == "updated_at"
    assert state["ev"]["cursor_value"] == "2024-01-01 10:00:00+00"
    assert state["fb"]["cursor_field"] == "a:b" and state["fb"]["cursor_value"] == 9


def test_incremental_filter_bounds_the_cursor(firn_job):
    """The cursor a run records is the largest among the rows its `filter` copies: a row the
    filter leaves out with a larger cursor must not make the next run skip rows (values
    compared with the source)."""
    job = firn_job(
        [{"stream_name": "ev", "sync_mode": "incremental", "cursor_field": "updated_at",
          "filter": "v <> 'skip'"}],
        mode="incremental",
        setup=("CREATE TABLE ev (id int PRIMARY KEY, v text, amount numeric(10,2), "
               "updated_at timestamptz NOT NULL)",
               "INSERT INTO ev SELECT g, 'v' || g, g * 1.25, "
               "'2024-01-01'::timestamptz + g * interval '1 hour' FROM generate_series(1, 10) g",
               "INSERT INTO ev VALUES (99, 'skip', 0, '2030-01-01')"))
    want = f"SELECT {COLS} FROM ev WHERE v <> 'skip'"
    job.sync()
    rows, tbl = table_rows(job, "ev")
    assert rows == job.source_rows(want)
    assert cursor_summary(tbl)["firn.cursor"] == "2024-01-01 10:00:00+00"
    assert cursor_summary(tbl)["firn.cursor-count"] == "1"
    # A row between the copied maximum and the filtered-out row, one tied at the maximum, and
    # one more the filter leaves out.
    job.sql("INSERT INTO ev VALUES (11, 'late', 11, '2025-06-01'), "
            "(12, 'tie', 12, '2024-01-01 10:00:00+00'), (98, 'skip', 0, '2031-01-01')")
    job.sync()
    rows, tbl = table_rows(job, "ev")
    assert rows == job.source_rows(want)
    assert cursor_summary(tbl)["firn.cursor"] == "2025-06-01 00:00:00+00"
    job.sql("UPDATE ev SET v = 'changed', updated_at = '2026-01-01' WHERE id = 5")
    job.sync()
    rows, _ = table_rows(job, "ev")
    assert rows == job.source_rows(want)
