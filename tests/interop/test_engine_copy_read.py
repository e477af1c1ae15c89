# SPDX-License-Identifier: Apache-2.0
"""The backfill's COPY reader on both of its waits (src/source/pg/pg_backfill.c, copy_next).

Rows reach the decoder through PQgetlineAsync, straight into the decoder's buffer; a tuple
longer than the buffer's room arrives in parts. Without TLS the reader waits on the socket
(poll with a receive low-water mark); with TLS it polls too, but first asks OpenSSL for
decrypted bytes the socket no longer shows. Each wait is run here on a table
whose rows are small, a few KiB, and 100 KiB to 1.5 MiB (past the 64 KiB room, so those come
in parts), over two connections, and the table must equal PostgreSQL value by value through
pyiceberg and DuckDB. The first row (1.25 MiB) shares its CopyData message with the stream's
header, so the decoder's room is left holding the start of a tuple behind a consumed header
(the one way a whole-message feed leaves a leftover)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PgCluster
from firnutil import FirnEnv, arrow_rows, diff_rows, rows_hash, source_rows

SCHEMA = """
CREATE TABLE mixed (id int8 PRIMARY KEY, amount numeric(12,2), at timestamptz, note text,
                    blob bytea);
INSERT INTO mixed
SELECT g, CASE WHEN g % 11 = 0 THEN NULL ELSE (g * 37 % 100000) / 100.0 END,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '17 second',
       CASE WHEN g = 1 THEN repeat(md5('first'), 40000)
            WHEN g % 500 = 0 THEN repeat(md5(g::text), 100000 / 32 * (1 + g % 1500 / 100))
            WHEN g % 7 = 0 THEN repeat('k', 3000 + g % 997)
            WHEN g % 13 = 0 THEN NULL
            ELSE 'n' || g END,
       CASE WHEN g % 3 = 0 THEN decode(md5(g::text), 'hex') END
FROM generate_series(1, 30000) g;
"""


def copy_and_compare(cluster: PgCluster, firn_bin, duck, root: Path, sslmode: str):
    dbname = "copy_read"
    with cluster.connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {dbname}")
    try:
        with cluster.connect(dbname=dbname) as conn:
            conn.execute(SCHEMA)
            longest = conn.execute("SELECT max(octet_length(note)) FROM mixed").fetchone()[0]
            assert longest > 1_000_000  # several times the reader's 64 KiB room
            fe = FirnEnv(firn_bin, root, dbname)
            fe.setup(cluster, ["mixed"], source={"sslmode": sslmode, "parallelism": 2,
                                                 "chunk_size": "1MiB", "batch_rows": 2000})
            fe.sync()
            ice = fe.catalog().load_table("e2e.mixed")
            names = [f.name for f in ice.schema().fields if not f.name.startswith("_firn_")]
            expected = source_rows(conn, "mixed", ice.schema(), names)
            assert len(expected) == 30000
            for reader, arrow in (("pyiceberg", ice.scan().to_arrow()),
                                  ("duckdb", fe.duckdb_arrow(duck, "mixed"))):
                actual = arrow_rows(arrow, names)
                diff = diff_rows(expected, actual, key=0, names=names)
                assert not diff, f"{reader} over sslmode={sslmode} differs:\n{diff}"
                assert rows_hash(actual) == rows_hash(expected)
    finally:
        with cluster.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")


def test_copy_without_tls_waits_on_the_socket(pg, firn_bin, duck, tmp_path):
    copy_and_compare(pg, firn_bin, duck, tmp_path / "plain", "disable")


def test_copy_over_tls_reads_decrypted_bytes_first(pg_tls, firn_bin, duck, tmp_path):
    copy_and_compare(pg_tls, firn_bin, duck, tmp_path / "tls", "require")
