#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that this tree's Parquet writer writes the same bytes as an older revision's: builds
# both (release, with this tree's bench/parquet_bench.c, whose "edge" and "backfill" shapes need
# no writer change), writes the taxi table, the edge and the backfill shape at a few sizes with
# each and compares the files with cmp. Both builds say "build unknown" in created_by, so any difference is the
# writer's. Usage: bench/pq_identity.sh [REV (default main)] [ROWS...]. Exit 1 on a difference.
set -euo pipefail

rev=${1:-main}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 4096 20001 300000 1500000)
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pq_identity.XXXXXX)
trap 'rm -rf "$work"' EXIT

build() { # build SRC_DIR BUILD_DIR
    local launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
    GIT_DIR=/nonexistent cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
        >/dev/null
    cmake --build "$2" --target parquet_bench >/dev/null
}

mkdir -p "$work/old"
git -C "$src" archive "$rev" | tar -x -C "$work/old"
cp "$src/bench/parquet_bench.c" "$work/old/bench/parquet_bench.c"
build "$work/old" "$work/old-build"
build "$src" "$work/new-build"

fail=0
for rows in "${sizes[@]}"; do
    for shape in taxi edge backfill; do
        for level in 1 3; do
            "$work/old-build/bench/parquet_bench" "$rows" "$work/old.parquet" "$level" 1 "$shape" \
                >/dev/null
            "$work/new-build/bench/parquet_bench" "$rows" "$work/new.parquet" "$level" 1 "$shape" \
                >/dev/null
            if cmp -s "$work/old.parquet" "$work/new.parquet"; then
                echo "same: $rows rows, $shape, zstd $level ($(stat -c %s "$work/new.parquet") bytes)"
            else
                echo "DIFFERENT: $rows rows, $shape, zstd $level" >&2
                fail=1
            fi
        done
    done
done
exit $fail
