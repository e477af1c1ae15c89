#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The benchmark suite in one command (see bench/README.md):
#   bash bench/run.sh                  small size: fits a 2-core, 24 GiB machine in < 15 minutes
#   bash bench/run.sh --size large     a larger size (about an hour on such a machine)
#   bash bench/run.sh --size smoke     seconds; proves the harness works (pytest runs this)
# Other options go to bench/suite.py (--parallel N, --skip-peer, --workdir DIR, --out FILE).
#
# It installs what is missing (scripts/setup.sh; FIRN_SKIP_SETUP=1 skips that), builds firn with
# the release preset, starts a throwaway PostgreSQL 15 (tests/harness/pg_cluster.sh) tuned for
# benchmarking, and runs bench/suite.py there. The report goes to bench/results/<time>-<size>.json
# and, for small and large, also to bench/results/latest.json; a short table is printed.
#
# Environment: FIRN_BIN (firn to measure, default build/release/src/cli/firn),
#              FIRN_BENCH_PGURI (use this PostgreSQL instead of a throwaway one: it needs
#              wal_level=logical and a superuser; the suite creates database "bench" there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV_PY=${FIRN_CACHE:-$HOME/.cache/firn}/venv/bin/python
PG_BINDIR=${FIRN_PG_BINDIR:-/usr/lib/postgresql/15/bin}

say() { printf 'bench: %s\n' "$*" >&2; }

# Inside the throwaway cluster: give it benchmark settings (restart needed for shared_buffers).
if [[ ${1:-} == --inner ]]; then
    shift
    "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d postgres \
        -c "ALTER SYSTEM SET shared_buffers = '2GB'" \
        -c "ALTER SYSTEM SET max_wal_size = '8GB'" \
        -c "ALTER SYSTEM SET checkpoint_timeout = '30min'" \
        -c "ALTER SYSTEM SET maintenance_work_mem = '512MB'" \
        -c "ALTER SYSTEM SET max_parallel_workers_per_gather = 0"
    as_pg=()
    [[ $(id -u) -eq 0 ]] && as_pg=(runuser -u postgres --)
    (cd / && "${as_pg[@]}" "$PG_BINDIR/pg_ctl" -D "$FIRN_TEST_PGROOT/data" \
        -l "$FIRN_TEST_PGROOT/server.log" -w -t 60 restart >/dev/null)
    exec "$VENV_PY" bench/suite.py --uri "$FIRN_TEST_PGURI" "$@"
fi

size=small
for ((i = 1; i <= $#; i++)); do
    if [[ ${!i} == --size ]]; then
        j=$((i + 1))
        size=${!j}
    fi
done
extra=()
[[ $size == small || $size == large ]] && extra+=(--latest)

if [[ ${FIRN_SKIP_SETUP:-} != 1 ]]; then
    bash scripts/setup.sh >/dev/null
fi
[[ -x $VENV_PY ]] || {
    say "no venv python at $VENV_PY (run scripts/setup.sh)"
    exit 1
}

if [[ -z ${FIRN_BIN:-} ]]; then
    say "building firn (release preset)"
    if cmake --preset release >/dev/null && cmake --build --preset release -j2 >/dev/null; then
        export FIRN_BIN=$ROOT/build/release/src/cli/firn
    else
        say "WARNING: the release build failed; firn's figures will be marked not run"
        export FIRN_BIN=$ROOT/build/release/src/cli/firn.missing
    fi
fi

if [[ -n ${FIRN_BENCH_PGURI:-} ]]; then
    exec "$VENV_PY" bench/suite.py --uri "$FIRN_BENCH_PGURI" "${extra[@]}" "$@"
fi
exec bash tests/harness/pg_cluster.sh run -- bash bench/run.sh --inner "${extra[@]}" "$@"
