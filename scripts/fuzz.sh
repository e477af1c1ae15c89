#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Long fuzzing run (README "Tests and checks"): builds the libFuzzer targets of fuzz/ with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer (fuzz/CMakeLists.txt, -DFIRN_FUZZ=ON) in
# ${FIRN_CACHE:-~/.cache/firn}/fuzz-build, then runs each target for SECONDS (default 120) on a
# working copy of its corpus. Not part of scripts/test.sh, whose CTest replays the checked-in
# corpora. A finding is written to that folder's artifacts/<target>/ and named at the end; add
# the input to fuzz/corpus/<target>/ with the fix, so the replay keeps checking it.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   e.g. scripts/fuzz.sh 600 pg_copy pgoutput
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-120}
[[ $secs =~ ^[0-9]+$ && $secs -gt 0 ]] || {
    echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
    exit 2
}
shift || true
command -v clang >/dev/null || {
    echo "fuzz: clang is needed (apt-get install clang)" >&2
    exit 2
}
targets=("$@")
if ((${#targets[@]} == 0)); then
    for f in fuzz/*.c; do
        name=$(basename "$f" .c)
        [[ $name == replay_main ]] || targets+=("$name")
    done
fi
out=${FIRN_CACHE:-$HOME/.cache/firn}/fuzz-build
cmake -S . -B "$out" -G Ninja -DCMAKE_C_COMPILER=clang -DFIRN_FUZZ=ON \
    -DFIRN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link -O1 -g" >/dev/null
cmake --build "$out" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

found=0
for t in "${targets[@]}"; do
    corpus=$out/corpus/$t artifacts=$out/artifacts/$t
    mkdir -p "$corpus" "$artifacts"
    cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
    rm -f "$corpus"/README
    if "$out/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" "$corpus" >"$out/$t.log" 2>&1; then
        echo "fuzz_$t: $secs s, no finding ($(grep -o 'Done [0-9]* runs' "$out/$t.log"))"
    else
        found=1
        echo "fuzz_$t: FINDING: $(ls -t "$artifacts" | head -1) (log: $out/$t.log)"
    fi
done
exit $found
