# SPDX-License-Identifier: Apache-2.0
"""firn's deletion vectors and Puffin files against independent implementations: pyiceberg's Puffin
and DV reader (pyroaring = CRoaring underneath) reads what firn writes, and firn reads DVs whose
bitmaps CRoaring serialized (array, bitset and run containers, several 2^32 blocks)."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import zlib

import pytest

SETS = {
    "s3://b/t/data/one.parquet": {"positions": [5]},
    "s3://b/t/data/runs.parquet": {"ranges": [[0, 100], [70000, 200000]]},
    "s3://b/t/data/dense.parquet": {"positions": list(range(300000, 340000, 3))},
    "s3://b/t/data/mixed.parquet": {"positions": [1, 5, 65535, 65536, (1 << 32) + 9],
                                    "ranges": [[1000, 1010]]},
}


def expected(spec: dict) -> list[int]:
    out = set(spec.get("positions", []))
    for lo, hi in spec.get("ranges", []):
        out.update(range(lo, hi))
    return sorted(out)


@pytest.fixture
def tool(build_dir):
    path = build_dir / "tools" / "puffin_tool"
    if not path.is_file():
        pytest.fail(f"{path} missing: build the tools", pytrace=False)

    def run(*args: str) -> list[dict]:
        proc = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]
    return run


def test_pyiceberg_reads_firn_puffin(tool, tmp_path):
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
    from pyiceberg.table.puffin import PuffinFile

    spec = [{"file": f, **s} for f, s in SETS.items()]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "dv.puffin"
    blobs = tool("write", str(out), str(tmp_path / "spec.json"))
    data = out.read_bytes()
    puffin = PuffinFile(data)
    assert puffin.footer.properties == {"created-by": "firn-test puffin_tool"}
    assert [b.type for b in puffin.footer.blobs] == ["deletion-vector-v1"] * len(SETS)
    for meta, written in zip(puffin.footer.blobs, blobs):
        assert meta.fields == [2147483645]
        assert (meta.snapshot_id, meta.sequence_number) == (-1, -1)
        assert meta.compression_codec is None
        assert (meta.offset, meta.length) == (written["offset"], written["length"])
        assert meta.properties["referenced-data-file"] == written["file"]
        assert int(meta.properties["cardinality"]) == len(expected(SETS[written["file"]]))
        # The blob framing, checked independently of both readers.
        blob = data[meta.offset:meta.offset + meta.length]
        (length,) = struct.unpack(">I", blob[:4])
        assert length == meta.length - 8
        assert blob[4:8] == bytes.fromhex("D1D33964")
        assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])
    dvs = deletion_vectors_from_puffin_file(puffin)
    got = {dv.referenced_data_file: dv.to_vector().to_pylist() for dv in dvs}
    assert got == {f: expected(s) for f, s in SETS.items()}


def croaring_dv(positions: list[int], run_optimize: bool) -> bytes:
    """A deletion-vector-v1 blob whose 32-bit bitmaps CRoaring (pyroaring) serialized."""
    from pyroaring import BitMap

    keys: dict[int, list[int]] = {}
    for p in positions:
        keys.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    vector = struct.pack("<Q", len(keys))
    for key in sorted(keys):
        bm = BitMap(keys[key])
        if run_optimize:
            bm.run_optimize()
        vector += struct.pack("<I", key) + bm.serialize()
    body = bytes.fromhex("D1D33964") + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def puffin_file(blobs: list[tuple[str, bytes]]) -> bytes:
    data = b"PFA1"
    meta = []
    for file, blob in blobs:
        meta.append({"type": "deletion-vector-v1", "fields": [2147483645], "snapshot-id": -1,
                     "sequence-number": -1, "offset": len(data), "length": len(blob),
                     "properties": {"referenced-data-file": file}})
        data += blob
    payload = json.dumps({"blobs": meta}).encode()
    return data + b"PFA1" + payload + struct.pack("<I", len(payload)) + bytes(4) + b"PFA1"


def test_firn_reads_croaring_bitmaps(tool, tmp_path):
    rng = random.Random(11)
    cases = {
        "sparse": sorted(rng.sample(range(1 << 20), 3000)),
        "runs": list(range(10, 5000)) + list(range(65536, 65536 * 3)),
        "bitset": sorted(rng.sample(range(65536), 30000)),
        "blocks": [3, (1 << 32) + 1, (3 << 32) + 65536 * 7 + 5],
        "full": list(range(65536 * 2)),
    }
    blobs = []
    for name, pos in cases.items():
        for opt in (False, True):
            blobs.append((f"{name}-{opt}", croaring_dv(pos, opt)))
    path = tmp_path / "croaring.puffin"
    path.write_bytes(puffin_file(blobs))
    got = {r["file"]: r["positions"] for r in tool("read", str(path))}
    for name, pos in cases.items():
        for opt in (False, True):
            assert got[f"{name}-{opt}"] == pos, (name, opt)
