# SPDX-License-Identifier: Apache-2.0
"""Spark (with the Iceberg runtime) as an independent reader and writer of Iceberg tables kept in
a SQLite catalog, plus the other readers (pyiceberg, DuckDB) and value helpers the Spark interop
tests compare it with. The fixtures in conftest.py wrap this module.

Catalog layout. firn's embedded catalog, pyiceberg's SqlCatalog and Iceberg Java's JdbcCatalog
(what Spark uses here, `type=jdbc` on `jdbc:sqlite:<file>`) share two tables:

  iceberg_tables(catalog_name, table_namespace, table_name, metadata_location,
                 previous_metadata_location[, iceberg_type])   PK (catalog_name, ns, name)
  iceberg_namespace_properties(catalog_name, namespace, property_key, property_value)

Rows belong to a catalog by `catalog_name`: Iceberg Java uses the Spark catalog's name for it
(there is no property to override it), so the Spark catalog must be named like the firn/pyiceberg
catalog ("firn" by default). One SparkSession per (name, database, warehouse) does that: each is a
`newSession()` of the shared session, so the JVM starts once per pytest session.

Schema versions: "V0" has no `iceberg_type` column, "V1" (views) adds `iceberg_type VARCHAR(5)`
('TABLE' or 'VIEW'; NULL counts as a table). Iceberg Java 1.10 creates missing tables in the V0
layout and then uses V1 when the column exists, migrates V0 to V1 (ALTER TABLE) only when
`jdbc.schema-version=V1` is set, and otherwise stays V0. pyiceberg 0.12 creates a new catalog in
the V1 layout, detects V1 by probing the column and migrates only with `schema_version=v1`. So
both follow the database they find; we do NOT set `jdbc.schema-version` (that would ALTER a V0
database that firn or another tool made). Differences that remain: Java creates
`property_key`/`property_value` nullable, pyiceberg NOT NULL (neither writes NULLs); both give a
new namespace the property exists=true.

Locations: Spark (HadoopFileIO) writes metadata and data file locations as `file:/abs/path`
(one slash: Hadoop's Path drops the empty authority) even when the warehouse is
`file:///abs/path`; pyiceberg writes `file:///abs/path`. A committer on top of a Spark-written
table must accept both spellings (pyiceberg and DuckDB do).

Spark's Iceberg catalog caches loaded tables; `cache-enabled=false` makes every query reload
the catalog row, so commits by other processes (firn, pyiceberg) are seen at once.

Lock leak: Iceberg Java's JdbcCatalog.initialize (1.10.1, and still so upstream) leaves two
metadata ResultSets open when the catalog tables already exist (atomicCreateTable's getTables,
updateSchemaIfRequired's getColumns). With sqlite-jdbc such an unfinished statement keeps a
SHARED lock on the database for the life of the pooled connection, so no other process can
commit ("database is locked") while the Spark catalog lives. Any real Spark job on firn's SQLite
catalog does this; here SparkCatalogs.session() replaces the pool's connections right after the
catalog initialized (fresh_jdbc_connections), which closes the leaked statements.
"""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

REPO = Path(__file__).resolve().parents[2]
SPARK_JARS_FILE = REPO / "scripts" / "spark-jars.txt"


def cache_dir() -> Path:
    """${FIRN_CACHE:-$HOME/.cache/firn}, where scripts/setup.sh puts the venv and the jars."""
    return Path(os.environ.get("FIRN_CACHE") or Path.home() / ".cache" / "firn")


def spark_jars() -> list[Path]:
    """The jars of scripts/spark-jars.txt in the cache; raises if one is missing."""
    jars = []
    for line in SPARK_JARS_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        _group, artifact, version = line.split()[0].split(":")
        path = cache_dir() / "jars" / f"{artifact}-{version}.jar"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: run scripts/setup.sh")
        jars.append(path)
    return jars


def _java_home() -> str | None:
    """A Java 17 for Spark 3.5 (which does not support 21+ well): FIRN_SPARK_JAVA_HOME, else an
    existing JAVA_HOME, else Debian's openjdk-17 when present, else whatever `java` is on PATH."""
    explicit = os.environ.get("FIRN_SPARK_JAVA_HOME") or os.environ.get("JAVA_HOME")
    if explicit:
        return explicit
    for cand in sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*")):
        if os.access(os.path.join(cand, "bin", "java"), os.X_OK):
            return cand
    return None


# JVM options for a short-lived local driver: C1 only and the serial collector start much faster
# (measured: session start 24 s -> 8 s and first query 26 s -> 13 s on a loaded 2-core machine).
DRIVER_JAVA_OPTIONS = ("-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss4m "
                       "-Djava.net.preferIPv4Stack=true")


def build_spark_session(tmp_dir: Path, memory: str = "1g"):
    """Start the one local SparkSession of a test session: local[2], small driver, no UI, two
    shuffle partitions, UTC, Iceberg SQL extensions (DELETE/UPDATE/MERGE INTO), the Iceberg
    runtime and the SQLite JDBC driver on the driver class path. No Iceberg catalog is configured
    here: see spark_for_catalog. The caller stops it."""
    java_home = _java_home()
    if java_home:
        os.environ["JAVA_HOME"] = java_home
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # DriverManager only sees drivers of the system class loader, so the SQLite driver goes on
    # the driver class path (spark.jars would load it in a child loader: "No suitable driver").
    classpath = os.pathsep.join(str(p) for p in spark_jars())
    tmp_dir.mkdir(parents=True, exist_ok=True)
    conf = {
        "spark.master": "local[1]",
        "spark.app.name": "firn-interop",
        "spark.driver.memory": memory,
        "spark.driver.extraClassPath": classpath,
        "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "1",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(tmp_dir / "spark-warehouse"),
        "spark.local.dir": str(tmp_dir / "spark-local"),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@dataclass(frozen=True)
class SqlCatalogLoc:
    """Where an Iceberg SQL catalog lives: the SQLite database file, the warehouse folder and
    the catalog name stored in its rows (firn's default is "firn")."""

    db: Path
    warehouse: Path
    name: str = "firn"

    @property
    def sqlalchemy_uri(self) -> str:
        return f"sqlite:///{self.db}"

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:sqlite:{self.db}"

    @property
    def warehouse_uri(self) -> str:
        return Path(self.warehouse).resolve().as_uri()

    def pyiceberg(self):
        """pyiceberg's SqlCatalog on this database (new object each call: no caching)."""
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(self.name, uri=self.sqlalchemy_uri, warehouse=self.warehouse_uri)

    def metadata_location(self, table: str) -> str:
        """The current metadata_location row of "ns.table", read straight from SQLite."""
        import sqlite3

        ns, _, name = table.rpartition(".")
        con = sqlite3.connect(self.db)
        try:
            row = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND "
                "table_namespace = ? AND table_name = ?", (self.name, ns, name)).fetchone()
        finally:
            con.close()
        if row is None:
            raise KeyError(f"no table {table} in catalog {self.name} of {self.db}")
        return row[0]


def as_loc(catalog: SqlCatalogLoc | str | os.PathLike, warehouse: str | os.PathLike | None = None,
           name: str = "firn") -> SqlCatalogLoc:
    if isinstance(catalog, SqlCatalogLoc):
        return catalog
    if warehouse is None:
        raise TypeError("warehouse is required with a database path")
    return SqlCatalogLoc(Path(catalog), Path(warehouse), name)


@dataclass
class SparkCatalogs:
    """The shared SparkSession plus one child session per SQL catalog (see the module doc)."""

    base: Any
    _children: dict = field(default_factory=dict)

    def session(self, loc: SqlCatalogLoc):
        """A SparkSession whose Iceberg catalog `loc.name` is the JDBC catalog on `loc`; cached
        per (name, db, warehouse). Query tables as `<name>.<ns>.<table>`."""
        key = (loc.name, str(Path(loc.db).resolve()), loc.warehouse_uri)
        child = self._children.get(key)
        if child is None:
            child = self.base.newSession()
            prefix = f"spark.sql.catalog.{loc.name}"
            child.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
            child.conf.set(prefix + ".type", "jdbc")
            child.conf.set(prefix + ".uri", loc.jdbc_uri)
            child.conf.set(prefix + ".warehouse", loc.warehouse_uri)
            child.conf.set(prefix + ".cache-enabled", "false")
            fresh_jdbc_connections(child, loc.name)
            self._children[key] = child
        return child

    def sql(self, loc: SqlCatalogLoc, statement: str):
        """Run one Spark SQL statement against `loc` (write the table as `<name>.ns.t`) and
        return its rows as tuples (unsorted, Spark's Python types)."""
        return [tuple(r) for r in self.session(loc).sql(statement).collect()]

    def arrow(self, loc: SqlCatalogLoc, query: str):
        """The result of a query as a pyarrow Table (timestamps with time zone come back as
        timestamp[us, tz=UTC], without as timestamp[us]: the same as pyiceberg's to_arrow)."""
        import pyarrow as pa

        df = self.session(loc).sql(query)
        batches = df._collect_as_arrow()  # pyspark 3.5 has no public toArrow
        if not batches:
            from pyspark.sql.pandas.types import to_arrow_schema

            return pa.Table.from_batches([], schema=to_arrow_schema(df.schema))
        return pa.Table.from_batches(batches)

    def rows(self, loc: SqlCatalogLoc, table: str, columns: Sequence[str] | None = None,
             where: str | None = None) -> list[tuple]:
        """Rows of `ns.table` read by Spark, canonical (see canon_rows) and sorted."""
        cols = ", ".join(f"`{c}`" for c in columns) if columns else "*"
        query = f"SELECT {cols} FROM {loc.name}.{table}"
        if where:
            query += f" WHERE {where}"
        return canon_rows(self.arrow(loc, query).to_pylist())

    def iceberg_table(self, loc: SqlCatalogLoc, table: str):
        """The Iceberg Java Table object (py4j) of `ns.table`, freshly loaded through Spark's
        catalog: for commits Spark SQL cannot express (RowDelta with equality deletes)."""
        session = self.session(loc)
        util = session._jvm.org.apache.iceberg.spark.Spark3Util
        return util.loadIcebergTable(session._jsparkSession, f"{loc.name}.{table}")

    def commit_equality_deletes(self, loc: SqlCatalogLoc, table: str, path: str | os.PathLike,
                                field_ids: Sequence[int], record_count: int,
                                partition_path: str | None = None) -> int:
        """Commit an existing equality-delete Parquet file (rows of the equality columns, with
        their table field ids) to `ns.table` with Iceberg Java's RowDelta: a new snapshot whose
        sequence number is above every existing data file's. Returns the new snapshot id."""
        session = self.session(loc)
        jvm = session._jvm
        gateway = session.sparkContext._gateway
        tbl = self.iceberg_table(loc, table)
        ids = gateway.new_array(jvm.int, len(field_ids))
        for i, fid in enumerate(field_ids):
            ids[i] = int(fid)
        path = str(path)
        uri = path if "://" in path or path.startswith("file:") else Path(path).resolve().as_uri()
        builder = (jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(tbl.spec())
                   .ofEqualityDeletes(ids)
                   .withPath(uri)
                   .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
                   .withFileSizeInBytes(os.path.getsize(uri_to_path(uri)))
                   .withRecordCount(int(record_count)))
        if partition_path:
            builder = builder.withPartitionPath(partition_path)
        tbl.newRowDelta().addDeletes(builder.build()).commit()
        tbl.refresh()
        return int(tbl.currentSnapshot().snapshotId())


def fresh_jdbc_connections(session, name: str) -> int:
    """Initialize the Iceberg JDBC catalog `name` of a SparkSession and then replace every
    connection of its pool with a new one (JdbcClientPool.reconnect, through reflection), which
    releases the SQLite lock the catalog's initialization leaks (see the module doc). Returns
    the number of connections replaced."""
    gateway = session.sparkContext._gateway
    jvm = session._jvm
    # a statement loads the catalog with this session's conf (CatalogManager reads the conf of
    # the thread's active session, which a bare py4j call does not set)
    session.sql(f"SHOW NAMESPACES IN `{name}`").collect()
    spark_catalog = session._jsparkSession.sessionState().catalogManager().catalog(name)
    catalog = spark_catalog.icebergCatalog()
    if catalog.getClass().getName() != "org.apache.iceberg.jdbc.JdbcCatalog":
        raise TypeError(f"catalog {name} is a {catalog.getClass().getName()}, not a JdbcCatalog")

    def private(cls, obj, field_name):
        f = cls.getDeclaredField(field_name)
        f.setAccessible(True)
        return f.get(obj)

    pool = private(catalog.getClass(), catalog, "connections")
    clients = private(pool.getClass().getSuperclass(), pool, "clients")
    types = gateway.new_array(jvm.java.lang.Class, 1)
    types[0] = jvm.java.lang.Class.forName("java.sql.Connection")
    reconnect = pool.getClass().getDeclaredMethod("reconnect", types)
    reconnect.setAccessible(True)
    old = list(clients.toArray())
    for conn in old:
        args = gateway.new_array(jvm.java.lang.Object, 1)
        args[0] = conn
        fresh = reconnect.invoke(pool, args)  # closes conn (and its leaked statements)
        clients.remove(conn)
        clients.addLast(fresh)
    return len(old)


def uri_to_path(location: str) -> str:
    """A local path for file:///x, file:/x or x."""
    if location.startswith("file://"):
        return location[len("file://"):]
    if location.startswith("file:"):
        return location[len("file:"):]
    return location


# ---------------------------------------------------------------------------------------------
# Values: every reader's rows go through canon_rows, so they compare with == and sort stably.

def canon(value: Any) -> Any:
    """One value in a form every reader agrees on: aware datetimes in UTC, bytearray as bytes,
    lists as tuples, structs (dicts) as tuples of (name, value), maps (lists of pairs) as
    tuples, Decimals as ("decimal", value, exponent) so that the scale counts too (Decimal
    equality ignores it: 1.1 == 1.10); floats, strings, dates and naive datetimes as they are
    (a naive datetime never equals an aware one)."""
    if isinstance(value, decimal.Decimal):
        return ("decimal", value, value.as_tuple().exponent)
    if isinstance(value, float) and value != value:
        return ("float", "NaN")  # so that NaN equals NaN
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return tuple((k, canon(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(canon(v) for v in value)
    return value


def _sort_key(value: Any):
    if value is None:
        return (0,)
    if isinstance(value, tuple):
        return (1, tuple(_sort_key(v) for v in value))
    return (1, value)


def canon_rows(rows: Iterable[Any]) -> list[tuple]:
    """Rows (dicts from pyarrow's to_pylist, or tuples) as canonical tuples, sorted."""
    out = []
    for row in rows:
        values = row.values() if isinstance(row, dict) else row
        out.append(tuple(canon(v) for v in values))
    return sorted(out, key=_sort_key)


def pyiceberg_rows(loc: SqlCatalogLoc, table: str,
                   columns: Sequence[str] | None = None) -> list[tuple]:
    """Rows of `ns.table` read by pyiceberg (applies position deletes; raises on equality
    deletes, which pyiceberg 0.12 cannot read), canonical and sorted."""
    tbl = loc.pyiceberg().load_table(table)
    scan = tbl.scan(selected_fields=tuple(columns)) if columns else tbl.scan()
    arrow = scan.to_arrow()
    if columns:
        arrow = arrow.select(list(columns))
    return canon_rows(arrow.to_pylist())


def duckdb_rows(loc: SqlCatalogLoc, table: str, columns: Sequence[str] | None = None,
                con=None) -> list[tuple]:
    """Rows of `ns.table` read by DuckDB's iceberg_scan of the current metadata file (applies
    position and equality deletes), canonical and sorted."""
    from conftest import duckdb_connect

    own = con is None
    con = con or duckdb_connect()
    try:
        cols = ", ".join(f'"{c}"' for c in columns) if columns else "*"
        meta = loc.metadata_location(table).replace("'", "''")
        arrow = con.execute(f"SELECT {cols} FROM iceberg_scan('{meta}')").to_arrow_table()
    finally:
        if own:
            con.close()
    return canon_rows(arrow.to_pylist())


def delete_file_contents(loc: SqlCatalogLoc, table: str) -> list[tuple[int, tuple]]:
    """(content, equality_ids) of every live delete file of the current snapshot, from
    pyiceberg's metadata reader: 1 = position deletes, 2 = equality deletes."""
    tbl = loc.pyiceberg().load_table(table)
    files = tbl.inspect.delete_files().to_pylist()
    return sorted((f["content"], tuple(f["equality_ids"] or ())) for f in files)


# ---------------------------------------------------------------------------------------------
# Checks shared by the Spark interop tests and by tests of tables firn wrote.

def write_equality_delete_file(path: str | os.PathLike, columns: Sequence[tuple[str, int, Any]],
                               rows: Sequence[Sequence[Any]]) -> int:
    """Write an equality-delete Parquet file with pyarrow: one column per equality field, given as
    (name, table field id, pyarrow type), carrying the table's field id (PARQUET:field_id) as the
    spec requires. Returns the number of rows (the delete file's record_count)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([pa.field(name, typ, nullable=False,
                                 metadata={b"PARQUET:field_id": str(fid).encode()})
                        for name, fid, typ in columns])
    arrays = [pa.array([r[i] for r in rows], type=typ) for i, (_n, _f, typ) in enumerate(columns)]
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), str(path))
    return len(rows)


def assert_readers_agree(spark: SparkCatalogs, loc: SqlCatalogLoc, table: str,
                         expected: Iterable[Sequence[Any]], columns: Sequence[str] | None = None,
                         equality_deletes: bool | None = None,
                         position_deletes: bool | None = None):
    """Spark (JDBC catalog), DuckDB (iceberg_scan of the catalog's current metadata file) and
    pyiceberg all return exactly `expected` (any order; compared value by value after canon).

    equality_deletes=True requires at least one live equality-delete file in the current
    snapshot (so the check cannot pass on a table without them) and expects pyiceberg, which
    cannot apply them, to refuse the scan; False requires none; None does not look.
    position_deletes=True/False likewise requires some/no live position-delete file."""
    want = canon_rows(expected)
    deletes = delete_file_contents(loc, table)
    if equality_deletes is not None:
        have = any(content == 2 for content, _ids in deletes)
        assert have == equality_deletes, f"equality delete files of {table}: {deletes}"
    if position_deletes is not None:
        have = any(content == 1 for content, _ids in deletes)
        assert have == position_deletes, f"position delete files of {table}: {deletes}"

    got_spark = spark.rows(loc, table, columns)
    assert got_spark == want, f"spark read of {table}"
    got_duck = duckdb_rows(loc, table, columns)
    assert got_duck == want, f"duckdb read of {table}"
    if any(content == 2 for content, _ids in deletes):
        try:
            got_py = pyiceberg_rows(loc, table, columns)
        except (ValueError, NotImplementedError) as e:
            assert "equality delete" in str(e), e
        else:  # a pyiceberg that learned equality deletes must agree too
            assert got_py == want, f"pyiceberg read of {table}"
    else:
        assert pyiceberg_rows(loc, table, columns) == want, f"pyiceberg read of {table}"


def check_equality_delete_table(spark: SparkCatalogs, loc: SqlCatalogLoc, table: str,
                                expected: Iterable[Sequence[Any]],
                                columns: Sequence[str] | None = None):
    """What a table with equality deletes (firn's upserts and deletes by primary key) must give:
    at least one live equality-delete file, and Spark and DuckDB read exactly `expected`
    (pyiceberg 0.12 refuses such scans; see assert_readers_agree)."""
    assert_readers_agree(spark, loc, table, expected, columns, equality_deletes=True)
