#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Read cost of firn's delete encodings (bench/deletes_bench.py; see bench/README.md):
#   bash bench/deletes.sh                                  1 M rows, 10 rounds of changes
#   bash bench/deletes.sh --rows 20000 --rounds 3 --reps 1 seconds
#   bash bench/deletes.sh --spark                          also time Spark
# Builds firn with the release preset (unless FIRN_BIN is set), starts a throwaway PostgreSQL
# (tests/harness/pg_cluster.sh; FIRN_BENCH_PGURI uses an existing server with wal_level=logical)
# and runs bench/deletes_bench.py there; other options go to it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_PY=${FIRN_CACHE:-$HOME/.cache/firn}/venv/bin/python
if [[ -z ${FIRN_BIN:-} ]]; then
    printf 'bench: building firn (release preset)\n' >&2
    cmake --preset release >/dev/null
    cmake --build --preset release -j2 --target firn >/dev/null
    export FIRN_BIN=$PWD/build/release/src/cli/firn
fi
if [[ -n ${FIRN_BENCH_PGURI:-} ]]; then
    exec "$VENV_PY" bench/deletes_bench.py --uri "$FIRN_BENCH_PGURI" "$@"
fi
exec bash tests/harness/pg_cluster.sh run -- "$VENV_PY" bench/deletes_bench.py "$@"
