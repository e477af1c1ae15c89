# SPDX-License-Identifier: Apache-2.0
"""Format-v3 tables firn syncs with deletion vectors (destination readers that all read v3 DVs):
upserts, deletes, key changes and delete + re-insert over several CDC rounds, each a new firn
process that reloads its key index from the DVs of the previous ones. Checked by independent
readers: pyiceberg (table metadata, manifests, its own Puffin/DV reader, rows) and DuckDB
(rows); Spark reads the same rows and then commits its own DVs on top, which firn merges."""

from __future__ import annotations

import struct
import zlib
from collections import Counter

import pytest

from firnsync import check_partitions, snapshot_chain, summary_of
from rest_fixtures import *  # noqa: F401,F403  (the rest_catalog fixture)
from sparkutil import assert_readers_agree, duckdb_rows, pyiceberg_rows, uri_to_path

V3 = {"readers": ["spark", "duckdb", "pyiceberg"]}
COLS = ["id", "v", "n"]
SETUP = [
    "CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)",
    "INSERT INTO items SELECT g, 'v' || g, g % 7 FROM generate_series(1, 400) g",
    "CREATE TABLE pairs (a text, b int, w text, PRIMARY KEY (a, b))",
    "INSERT INTO pairs SELECT 'k' || (g % 5), g, 'w' || g FROM generate_series(1, 60) g",
]
STREAMS = [{"stream_name": "items", "partition": ["bucket(3, id)"]},
           {"stream_name": "pairs"}]


def check_rows(job, name, cols):
    want = job.source_rows(f"SELECT {', '.join(cols)} FROM {name}")
    got = pyiceberg_rows(job.loc, job.table(name), cols)
    assert got == want, f"pyiceberg rows of {name}: {len(got)} vs {len(want)}"
    got = duckdb_rows(job.loc, job.table(name), cols)
    assert got == want, f"duckdb rows of {name}: {len(got)} vs {len(want)}"
    return want


def entries(tbl, snap=None) -> list[dict]:
    """Manifest entries of a snapshot (default: current) read with pyiceberg's Avro reader and
    its v3 manifest schema, with sequence-number/snapshot-id inheritance (pyiceberg's
    inspect.entries fails on entries without column metrics, as Java's DVs are too), plus the
    manifest's first_row_id. One dict per entry: status, snapshot_id, data_file{...}."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (MANIFEST_ENTRY_SCHEMAS, MANIFEST_LIST_FILE_SCHEMAS,
                                    DataFile, DataFileContent, FileFormat, ManifestContent,
                                    ManifestEntry, ManifestEntryStatus, ManifestFile,
                                    PartitionFieldSummary, _inherit_from_manifest)

    snap = snap or tbl.current_snapshot()
    with AvroFile[ManifestFile](
            tbl.io.new_input(snap.manifest_list), MANIFEST_LIST_FILE_SCHEMAS[3],
            read_types={-1: ManifestFile, 508: PartitionFieldSummary},
            read_enums={517: ManifestContent}) as reader:
        manifests = list(reader)
    out = []
    for mf in manifests:
        mf_first_row_id = mf._data[15]  # 520 first_row_id (no pyiceberg property yet)
        with AvroFile[ManifestEntry](
                tbl.io.new_input(mf.manifest_path), MANIFEST_ENTRY_SCHEMAS[3],
                read_types={-1: ManifestEntry, 2: DataFile},
                read_enums={0: ManifestEntryStatus, 101: FileFormat,
                            134: DataFileContent}) as reader:
            for entry in reader:
                entry = _inherit_from_manifest(entry, mf)
                df = entry.data_file
                out.append({
                    "status": entry.status.value, "snapshot_id": entry.snapshot_id,
                    "manifest_first_row_id": mf_first_row_id,
                    "data_file": {
                        "content": df.content.value, "file_path": df.file_path,
                        "file_format": df.file_format.value,
                        "partition": tuple(df.partition[i] for i in range(len(df.partition))),
                        "record_count": df.record_count,
                        "file_size_in_bytes": df.file_size_in_bytes,
                        # v3 fields by position in DATA_FILE_TYPE[3] (no properties yet)
                        "first_row_id": df._data[16],
                        "referenced_data_file": df._data[17],
                        "content_offset": df._data[18],
                        "content_size_in_bytes": df._data[19]}})
    return out


def live_entries(tbl):
    return [e for e in entries(tbl) if e["status"] != 2]


def dv_positions(tbl) -> dict[str, dict]:
    """Every live DV, read through pyiceberg's Puffin and DV readers, with the framing checked
    independently: {data file: {"positions", "puffin", "offset", "length"}}."""
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
    from pyiceberg.table.puffin import PuffinFile

    out = {}
    for e in live_entries(tbl):
        df = e["data_file"]
        if df["content"] != 1:
            continue
        assert df["file_format"].upper() == "PUFFIN", df["file_path"]
        ref = df["referenced_data_file"]
        assert ref and ref not in out, f"two live DVs for {ref}"
        data = open(uri_to_path(df["file_path"]), "rb").read()
        assert len(data) == df["file_size_in_bytes"]
        off, length = df["content_offset"], df["content_size_in_bytes"]
        blob = data[off:off + length]
        assert struct.unpack(">I", blob[:4])[0] == length - 8
        assert blob[4:8] == bytes.fromhex("D1D33964")
        assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])
        puffin = PuffinFile(data)
        [meta] = [b for b in puffin.footer.blobs if b.offset == off]
        assert meta.length == length and meta.properties["referenced-data-file"] == ref
        assert int(meta.properties["cardinality"]) == df["record_count"]
        dvs = {dv.referenced_data_file: dv for dv in deletion_vectors_from_puffin_file(puffin)}
        positions = dvs[ref].to_vector().to_pylist()
        assert len(positions) == df["record_count"]
        out[ref] = {"positions": positions, "puffin": df["file_path"], "offset": off,
                    "length": length}
    return out


def check_dv_snapshot(tbl, snap, prev_dvs: dict) -> dict:
    """The snapshot's DVs: one Puffin file per DV it added (duckdb reads the table), each DV a superset of the data
    file's previous DV, replaced ones removed in the same snapshot, summary counts agree."""
    s = summary_of(snap)
    dvs = dv_positions(tbl)
    ents = entries(tbl, snap)
    added = [e["data_file"] for e in ents
             if e["status"] == 1 and e["snapshot_id"] == snap.snapshot_id
             and e["data_file"]["content"] == 1]
    removed = [e["data_file"] for e in ents if e["status"] == 2
               and e["data_file"]["content"] == 1]
    # duckdb is among the readers: one Puffin file per DV (firn__dv_puffin_per_vector)
    assert len({d["file_path"] for d in added}) == len(added), "several DVs in one Puffin file"
    assert int(s.get("added-dvs", 0)) == len(added), s
    assert int(s.get("removed-dvs", 0)) == len(removed), s
    assert "added-position-delete-files" not in s, s
    assert int(s.get("added-position-deletes", 0)) == sum(d["record_count"] for d in added)
    for d in added:
        ref = d["referenced_data_file"]
        old = prev_dvs.get(ref)
        if old:
            assert set(old["positions"]) <= set(dvs[ref]["positions"]), ref
            assert any(r["referenced_data_file"] == ref and r["file_path"] == old["puffin"]
                       for r in removed), f"old DV of {ref} not removed"
    assert len(removed) == sum(1 for d in added if d["referenced_data_file"] in prev_dvs)
    # total-* counts DVs as delete files and their cardinalities as position deletes
    live = live_entries(tbl)
    assert int(s["total-delete-files"]) == sum(1 for e in live if e["data_file"]["content"] == 1)
    assert int(s["total-position-deletes"]) == sum(
        e["data_file"]["record_count"] for e in live if e["data_file"]["content"] == 1)
    assert int(s["total-records"]) == sum(
        e["data_file"]["record_count"] for e in live if e["data_file"]["content"] == 0)
    return dvs


def check_row_lineage(tbl):
    """Snapshots take consecutive row-id ranges up to next-row-id; every live data file has a
    first_row_id (explicit, or inherited from its manifest's as the spec says) and the ranges
    of the live files do not overlap."""
    md = tbl.metadata
    assert md.format_version == 3
    nxt = 0
    for snap in snapshot_chain(tbl):
        assert snap.first_row_id == nxt, (snap.first_row_id, nxt)
        nxt += snap.added_rows
    assert md.next_row_id == nxt
    ranges = []
    inherit: dict[str, int] = {}
    for e in entries(tbl):
        df = e["data_file"]
        if df["content"] != 0:
            assert e["manifest_first_row_id"] is None
            continue
        first = df["first_row_id"]
        if first is None and e["status"] != 2:
            key = e["manifest_first_row_id"]
            assert key is not None, "data manifest without first_row_id"
            first = inherit.setdefault(df["file_path"], key)
        if e["status"] != 2:
            ranges.append((first, first + df["record_count"]))
    # inherited ids: within a manifest, files follow each other (checked via disjointness below
    # only when explicit); all ranges below next-row-id
    ranges.sort()
    for (a0, a1), (b0, _b1) in zip(ranges, ranges[1:]):
        assert a1 <= b0 or a0 == b0, f"row-id ranges overlap: {ranges}"
    assert all(r1 <= nxt for _r0, r1 in ranges), (ranges, nxt)


def test_v3_table_with_deletion_vectors(firn_job):
    job = firn_job(STREAMS, setup=SETUP)
    job.destination_extra = dict(V3)
    loc = job.loc
    job.sync()
    assert "created with format version 3 and deletion vectors: every declared reader" in \
        (job.workdir / "sync-1.log").read_text()
    tbl = loc.pyiceberg().load_table(job.table("items"))
    assert tbl.metadata.format_version == 3
    assert tbl.metadata.next_row_id == 400
    check_rows(job, "items", COLS)
    check_rows(job, "pairs", ["a", "b", "w"])
    dvs = {}
    pdvs = {}

    rounds = [
        # updates, deletes, a key change, insert + delete in one round
        ("UPDATE items SET v = 'u1' WHERE id IN (1, 2, 3, 100, 250, 399)",
         "DELETE FROM items WHERE id IN (4, 5, 6, 7, 300)",
         "UPDATE items SET id = 1000 WHERE id = 10",
         "INSERT INTO items VALUES (2000, 'new', 1), (2001, 'gone', 2)",
         "DELETE FROM items WHERE id = 2001",
         "UPDATE pairs SET w = 'x' WHERE b < 10",
         "DELETE FROM pairs WHERE a = 'k1'"),
        # rows in files that already have a DV; re-insert of deleted keys; rows firn wrote
        ("UPDATE items SET v = 'u2' WHERE id IN (8, 9, 11, 1000, 2000)",
         "INSERT INTO items VALUES (4, 'back', 4), (300, 'back', 3)",
         "DELETE FROM items WHERE id IN (1, 101, 102)",
         "UPDATE items SET id = 3000 WHERE id = 2",
         "UPDATE pairs SET b = b + 100 WHERE a = 'k2'"),
        # many rows of one file: dense DV, then the same keys once more
        ("UPDATE items SET n = n + 1 WHERE id % 3 = 0",
         "DELETE FROM items WHERE id BETWEEN 150 AND 199",
         "UPDATE items SET v = 'u3' WHERE id % 3 = 0 AND id < 60"),
    ]
    for i, stmts in enumerate(rounds):
        job.sql(*stmts)
        job.sync()
        tbl = loc.pyiceberg().load_table(job.table("items"))
        chain = snapshot_chain(tbl)
        assert len(chain) == 2 + i
        dvs = check_dv_snapshot(tbl, chain[-1], dvs)
        check_rows(job, "items", COLS)
        check_partitions(tbl, ["id"])
        pairs = loc.pyiceberg().load_table(job.table("pairs"))
        pchain = snapshot_chain(pairs)
        assert len(pchain) == (2 + i if i < 2 else 3)  # round 3 leaves pairs alone
        if i < 2:
            pdvs = check_dv_snapshot(pairs, pchain[-1], pdvs)
        check_rows(job, "pairs", ["a", "b", "w"])
        check_row_lineage(tbl)
        check_row_lineage(pairs)
    # every DV lives in its data file's partition
    files = {e["data_file"]["file_path"]: e["data_file"]["partition"]
             for e in live_entries(tbl) if e["data_file"]["content"] == 0}
    for e in live_entries(tbl):
        df = e["data_file"]
        if df["content"] == 1:
            assert df["partition"] == files[df["referenced_data_file"]]
    assert Counter(len(d["positions"]) > 0 for d in dvs.values())[True] == len(dvs)
    # a run without changes commits nothing
    job.sync()
    assert len(snapshot_chain(loc.pyiceberg().load_table(job.table("items")))) == 4


def test_v3_rest_catalog(firn_job, rest_catalog):
    """The same through the Iceberg REST catalog fixture (Java's reference catalog): the
    server creates the v3 table, takes firn's snapshots with their first-row-id and added-rows
    and advances next-row-id itself."""
    import uuid

    loc = rest_catalog
    job = firn_job([{"stream_name": "items"}], setup=SETUP[:2], catalog=loc.firn_catalog(),
                   catalog_loc=loc, namespace="r_" + uuid.uuid4().hex[:8],
                   storage=loc.firn_storage(), destination_extra=dict(V3))
    job.sync()
    for stmts in (("UPDATE items SET v = 'r1' WHERE id % 9 = 0", "DELETE FROM items WHERE id < 5"),
                  ("UPDATE items SET v = 'r2' WHERE id % 9 = 0 OR id IN (10, 11)",
                   "DELETE FROM items WHERE id = 9")):
        job.sql(*stmts)
        job.sync()
        want = job.source_rows("SELECT id, v, n FROM items")
        tbl = loc.pyiceberg().load_table(job.table("items"))
        got = pyiceberg_rows(loc, job.table("items"), COLS)
        assert got == want
        assert tbl.metadata.format_version == 3
        check_row_lineage(tbl)
        dv_positions(tbl)  # one live DV per data file, framing and cardinality checked
    s = summary_of(tbl.current_snapshot())  # the backfill file's DV replaced, round 1's new
    assert (s.get("added-dvs"), s.get("removed-dvs")) == ("2", "1"), s


def test_duckdb_reads_many_vectors_per_commit(firn_job):
    """DuckDB 1.5.5 with its external file cache on (the default) applies the first deletion
    vector it read from a Puffin file to every other data file whose vector is in that file
    (bench/README.md). Reproduced here without the workaround: 20,000 rows, 3 rounds of changes
    spread over the base file and the files earlier rounds wrote. With duckdb among the readers
    firn writes one Puffin file per vector, and DuckDB returns the source rows value by value."""
    job = firn_job([{"stream_name": "wide"}], setup=[
        "CREATE TABLE wide (id bigint PRIMARY KEY, a int NOT NULL, c text NOT NULL)",
        "INSERT INTO wide SELECT g, g % 1000, md5(g::text) FROM generate_series(1, 20000) g"])
    job.destination_extra = dict(V3)
    job.sync()
    cols = ["id", "a", "c"]
    for r in range(1, 4):
        job.sql(f"UPDATE wide SET a = a + {r}, c = md5(c) WHERE id % 43 = {r}",
                f"DELETE FROM wide WHERE id % 100 = {r * 7}",
                f"INSERT INTO wide SELECT g, g % 7, 'n' || g FROM generate_series({40000 + r * 100},"
                f" {40000 + r * 100 + 60}) g")
        job.sync()
        tbl = job.loc.pyiceberg().load_table(job.table("wide"))
        dvs = dv_positions(tbl)
        assert len(dvs) >= min(r, 2), sorted(dvs)  # the base file and the files of rounds
        puffins = Counter(d["puffin"] for d in dvs.values())
        assert set(puffins.values()) == {1}, f"several vectors in one Puffin file: {puffins}"
        check_rows(job, "wide", cols)
