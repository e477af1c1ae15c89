# SPDX-License-Identifier: Apache-2.0
"""The key index kept next to the table (issue 8, docs/internals/pkindex.md "Persistence"): runs
and a manifest under <table location>/metadata/firn-index/, named by the snapshot summary key
firn.key-index. Host A syncs with its own index_dir; hosts B, C and D start with empty ones and
download the index instead of reading the key columns (C also catches an older copy up with a
commit made after it); a damaged or missing run makes D rebuild. The manifests are decoded here
independently and every run file is checked against its crc32; after every run both tables (an
int8 key and a composite text key) equal the source through pyiceberg and DuckDB."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from firnutil import FirnEnv
from test_engine_e2e import compare_table

SCHEMA = """
CREATE TABLE big (id int8 PRIMARY KEY, v int4, note text);
INSERT INTO big SELECT g, g % 1000, 'n' || g FROM generate_series(1, 30000) g;
CREATE TABLE named (region text, code text, n int4, PRIMARY KEY (region, code));
INSERT INTO named SELECT 'r' || (g % 50), 'c' || g, g FROM generate_series(1, 10000) g;
"""
TABLES = ["big", "named"]


def change(conn, k: int) -> None:
    """Round k: updates and deletes spread over every file, new keys, deleted keys back."""
    conn.execute(f"UPDATE big SET v = v + 1, note = note || 'u' WHERE id % 97 = {k}")
    conn.execute(f"DELETE FROM big WHERE id % 101 = {k + 1}")
    conn.execute(f"INSERT INTO big SELECT 200000 + {k} * 1000 + g, g, 'new' FROM "
                 "generate_series(1, 500) g")
    conn.execute(f"INSERT INTO big SELECT id, 7, 'back' FROM generate_series({k}, 30000, 101) id "
                 f"WHERE id % 101 = {k} ON CONFLICT (id) DO NOTHING")
    conn.execute(f"UPDATE named SET n = n + 1000000 WHERE n % 89 = {k}")
    conn.execute(f"DELETE FROM named WHERE n % 83 = {k + 2}")
    conn.execute(f"INSERT INTO named SELECT 'new', 'k{k}-' || g, g FROM generate_series(1, 300) g")


def read_manifest(path: Path) -> dict:
    """Decodes a FIRNPKX1 index manifest (the layout in docs/internals/pkindex.md)."""
    b = path.read_bytes()
    assert b[:8] == b"FIRNPKX1", path
    version, crc = struct.unpack_from("<II", b, 8)
    assert version == 1 and crc == zlib.crc32(b[16:]), path
    off = 16

    def take(fmt):
        nonlocal off
        v = struct.unpack_from(fmt, b, off)
        off += struct.calcsize(fmt)
        return v

    def text():
        nonlocal off
        (n,) = take("<I")
        off += n
        return b[off - n:off].decode()

    m = {"uuid": text()}
    m["snapshot"], = take("<q")
    off += 16  # seed
    m["keys"], m["next_run_id"], n_runs = take("<QII")
    m["runs"] = []
    for _ in range(n_runs):
        name = text()
        rid, level, size, entries, lo, hi, rcrc = take("<IIQQQQI")
        m["runs"].append({"name": name, "id": rid, "size": size, "entries": entries, "crc": rcrc})
    (n_files,) = take("<I")
    m["files"] = [text() for _ in range(n_files)]
    assert off == len(b)
    return m


def index_folder(fe: FirnEnv, table: str) -> Path:
    loc = fe.catalog().load_table(f"e2e.{table}").metadata.location
    return Path(loc.removeprefix("file://")) / "metadata" / "firn-index"


def check_folder(fe: FirnEnv, table: str) -> dict:
    """One manifest, for an ancestor of the current snapshot; exactly its runs, each matching its
    size and crc32; the current snapshot's summary names it (or it holds that snapshot)."""
    folder = index_folder(fe, table)
    manifests = sorted(folder.glob("index-*.pkm"))
    assert len(manifests) == 1, manifests
    m = read_manifest(manifests[0])
    runs = {p.name for p in folder.glob("run-*.pkr")}
    assert runs == {r["name"] for r in m["runs"]}, (runs, m["runs"])
    for r in m["runs"]:
        data = (folder / r["name"]).read_bytes()
        assert len(data) == r["size"] and zlib.crc32(data) == r["crc"], r
    ice = fe.catalog().load_table(f"e2e.{table}")
    snap = ice.current_snapshot()
    ref = snap.summary.additional_properties.get("firn.key-index", "") if snap else ""
    assert m["snapshot"] == snap.snapshot_id or ref.endswith(manifests[0].name), (m, ref)
    assert m["uuid"] == str(ice.metadata.table_uuid)
    return m


def test_index_moves_between_hosts(pg, pg_db, firn_bin, duck, tmp_path):
    with pg.connect(dbname=pg_db) as conn:
        conn.execute(SCHEMA)
        fe = FirnEnv(firn_bin, tmp_path / "firn", pg_db)

        def host(name: str) -> None:
            fe.setup(pg, TABLES, destination={"index_dir": str(tmp_path / name),
                                              "index_memory_limit": "4MiB"})

        def compare_all():
            for t in TABLES:
                compare_table(fe, conn, duck, t, key=None)

        # Host A: the backfill's end uploads each index; the stop has nothing newer to upload.
        host("a")
        out = fe.sync().stderr
        assert out.count("key index uploaded next to the table") == 2, out[-3000:]
        first = {t: check_folder(fe, t) for t in TABLES}
        assert first["big"]["keys"] == 30000 and first["named"]["keys"] == 10000
        compare_all()

        # A again: its own folder, then at the stop only the new runs go up; the old manifest
        # and the runs only it named are removed.
        change(conn, 1)
        out = fe.sync().stderr
        assert out.count("key index read from local disk") == 2, out[-3000:]
        assert out.count("key index uploaded next to the table") == 2, out[-3000:]
        second = {t: check_folder(fe, t) for t in TABLES}
        for t in TABLES:
            assert second[t]["snapshot"] != first[t]["snapshot"]
            kept = {r["name"] for r in first[t]["runs"]} & {r["name"] for r in second[t]["runs"]}
            assert kept, f"{t}: every run was uploaded again"
        compare_all()

        # Host B, empty index_dir: downloads the copy of the current snapshot, reads no key.
        host("b")
        change(conn, 2)
        out = fe.sync().stderr
        assert out.count("key index downloaded from the table") == 2, out[-3000:]
        assert "caught up next" not in out
        assert "key index loaded" not in out, out[-3000:]  # the rebuild's line
        compare_all()

        # B commits once more and is killed before its stop: the table is a commit ahead of
        # the copy next to it, whose manifest that commit's summary names.
        change(conn, 3)
        proc = fe.sync(env={"FIRN_TEST_CRASH": "before-ack:1"}, check=False)
        assert "FIRN_TEST_CRASH: killing" in proc.stderr, proc.stderr[-3000:]
        for t in TABLES:
            m = check_folder(fe, t)
            snap = fe.catalog().load_table(f"e2e.{t}").current_snapshot()
            assert m["snapshot"] != snap.snapshot_id

        # Host C: downloads the older copy and catches it up with the commit after it.
        host("c")
        change(conn, 4)
        out = fe.sync().stderr
        assert out.count("key index downloaded from the table") == 2, out[-3000:]
        assert out.count("(caught up next)") == 2, out[-3000:]
        assert "key index loaded" not in out, out[-3000:]
        caught = [ln for ln in out.splitlines() if "key index read from local disk" in ln]
        assert len(caught) == 2 and all(" 0 caught up" not in ln for ln in caught), caught
        compare_all()
        for t in TABLES:
            check_folder(fe, t)

        # Damage: a flipped byte in a run of one table, a missing run of the other. Host D
        # rebuilds both (one line each), still exact, and replaces the copies.
        big, named = (check_folder(fe, t) for t in TABLES)
        victim = index_folder(fe, "big") / big["runs"][-1]["name"]
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0x01
        victim.write_bytes(bytes(data))
        (index_folder(fe, "named") / named["runs"][0]["name"]).unlink()
        host("d")
        change(conn, 6)
        out = fe.sync().stderr
        assert out.count("key index next to the table not usable, rebuilding it") == 2, \
            out[-3000:]
        assert "does not match its checksum" in out
        assert out.count("key index loaded") == 2, out[-3000:]
        compare_all()
        for t in TABLES:
            check_folder(fe, t)
        change(conn, 7)
        host("e")
        out = fe.sync().stderr
        assert out.count("key index downloaded from the table") == 2, out[-3000:]
        compare_all()
