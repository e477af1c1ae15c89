#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Long kill -9 torture run (README "Operations", docs/operations.md): the kill loop of
# tests/interop/test_engine_restart.py (firn killed at FIRN_TEST_CRASH points and from outside
# while a writer changes the source, restarted each time, then every table checked against the
# source by full-row hash) in rounds of FIRN_TORTURE_ROUND points (default 100, a fresh database
# each) until N points were tried. Not part of scripts/test.sh. Uses FIRN_BIN (default
# build/asan/src/cli/firn: build it first). A failing round prints its seed for a replay.
#
# Usage: scripts/torture.sh N
set -euo pipefail
cd "$(dirname "$0")/.."

total=${1:-}
[[ $total =~ ^[0-9]+$ && $total -gt 0 ]] || {
    echo "usage: scripts/torture.sh N   (N kill points, e.g. 2000)" >&2
    exit 2
}
round_size=${FIRN_TORTURE_ROUND:-100}
# A private copy of the binary, so that a rebuild during a long run does not pull it away.
bin=${FIRN_BIN:-build/asan/src/cli/firn}
[[ -x $bin ]] || {
    echo "torture: no firn binary at $bin: build it (cmake --build --preset asan) or set FIRN_BIN" >&2
    exit 2
}
work=$(mktemp -d "${TMPDIR:-/tmp}/firn-torture.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/firn"
export FIRN_BIN=$work/firn
py=${FIRN_CACHE:-$HOME/.cache/firn}/venv/bin/python
logs=build/test-logs/torture
mkdir -p "$logs"

done_points=0
round=0
start=$SECONDS
while ((done_points < total)); do
    n=$((total - done_points < round_size ? total - done_points : round_size))
    seed=$(((RANDOM << 15) | RANDOM))
    echo "torture: round $round: $n kill points, FIRN_KILL_SEED=$seed"
    if ! FIRN_KILL_POINTS=$n FIRN_KILL_SEED=$seed "$py" -m pytest -q -s -p no:cacheprovider \
        tests/interop/test_engine_restart.py -k test_kill_points >"$logs/round-$round.log" 2>&1; then
        tail -n 40 "$logs/round-$round.log" >&2
        echo "torture: round $round FAILED (log $logs/round-$round.log); replay with:" >&2
        echo "  FIRN_KILL_POINTS=$n FIRN_KILL_SEED=$seed $py -m pytest -s" \
            "tests/interop/test_engine_restart.py -k test_kill_points" >&2
        exit 1
    fi
    grep -h "^kill loop: {" "$logs/round-$round.log" | cut -c1-200 || true
    done_points=$((done_points + n))
    round=$((round + 1))
done
echo "torture: $total kill points in $round rounds, $((SECONDS - start)) s: no loss, no duplicates"
