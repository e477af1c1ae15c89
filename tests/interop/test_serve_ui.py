# SPDX-License-Identifier: Apache-2.0
"""firn serve in a real browser (issue 30): tests/ui/walk.mjs drives Debian's chromium with npm
playwright-core (both installed by scripts/setup.sh) through setup, sign-in, sources,
destinations, the job wizard, a run and its log, asserting on page content; the screenshots
stay in build/test-logs/ui-screenshots. Then the Iceberg table the run wrote is compared with
the source by value."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from serveutil import drop_slots, Serve
from sparkutil import SqlCatalogLoc

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("FIRN_CACHE", Path.home() / ".cache" / "firn"))
NODE_DIR = CACHE / "ui-node"
ROWS = 1234


def test_pages_in_chromium(firn_bin, pg, pg_db, tmp_path):
    for need in (NODE_DIR / "node_modules" / "playwright-core", Path("/usr/bin/chromium")):
        assert need.exists(), f"{need} is missing: run scripts/setup.sh (it installs it)"
    node = shutil.which("node")
    assert node, "node is missing: run scripts/setup.sh"
    with pg.connect(dbname=pg_db) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, label text, price numeric(8, 2))")
        conn.execute(f"INSERT INTO items SELECT g, 'item ' || g, g / 4.0 "
                     f"FROM generate_series(1, {ROWS}) g")
        conn.execute("CREATE TABLE other (id int PRIMARY KEY)")
    shots = Path(os.environ.get("FIRN_BUILD_DIR", REPO / "build" / "asan")).parent / \
        "test-logs" / "ui-screenshots"
    shutil.rmtree(shots, ignore_errors=True)
    dest = tmp_path / "lake"
    (dest / "warehouse").mkdir(parents=True)
    s = Serve(firn_bin, tmp_path / "data").start()
    try:
        env = dict(os.environ, FIRN_UI_URL=s.url, FIRN_UI_TOKEN=s.setup_token(),
                   FIRN_UI_PG=json.dumps({"host": pg.host, "port": pg.port, "database": pg_db,
                                          "username": pg.user}),
                   FIRN_UI_DEST=str(dest), FIRN_UI_ROWS=str(ROWS), FIRN_UI_SHOTS=str(shots),
                   FIRN_UI_NODE=str(NODE_DIR))
        proc = subprocess.run([node, str(REPO / "tests" / "ui" / "walk.mjs")], env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0 and "walk: ok" in proc.stdout, (
            f"{proc.stdout}\n{proc.stderr}\nserver log:\n{s.log.read_text()[-4000:]}")
    finally:
        s.stop()
    loc = SqlCatalogLoc(dest / "catalog.db", dest / "warehouse", "firn")
    arrow = loc.pyiceberg().load_table("lake.items").scan(
        selected_fields=("id", "label", "price")).to_arrow()
    got = sorted(zip(*(arrow.column(c).to_pylist() for c in ("id", "label", "price"))))
    with pg.connect(dbname=pg_db) as conn:
        want = sorted(tuple(r) for r in conn.execute("SELECT id, label, price FROM items"))
    assert got == want
    drop_slots(pg, pg_db)
