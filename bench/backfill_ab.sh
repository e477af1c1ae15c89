#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interleaved A/B of the taxi backfill (bench/README.md "Comparing two builds"): runs
# bench/backfill_quick.sh once per variant per round, the variants in the given order in even
# rounds and in reverse order in odd rounds (so that neither always runs first after the other's
# page cache and server state), appends each run's line to a log, and prints per variant the
# mean, lowest and highest CPU-seconds per million rows, the mean wall ratio and the highest peak
# RSS. On this kind of shared VM a single run's CPU time drifts by +-10 % or more; only the means
# of several interleaved rounds on a quiet machine compare two builds.
#
#   bash bench/backfill_ab.sh ROUNDS LOG 'label|firn binary|VAR=value ...' ...
#   e.g. bash bench/backfill_ab.sh 4 /tmp/ab.log "main|$PWD/build/release/src/cli/firn|" \
#            "batch4k|$PWD/build/release/src/cli/firn|BATCH_ROWS=4096"
#
# Needs what backfill_quick.sh needs (the PG* variables of a server whose database, PGDATABASE,
# holds `trips`). Each run gets a fresh WORKDIR under a temporary folder, removed at the end.
# The log keeps every run's full line: `bash bench/backfill_ab.sh summary LOG` prints the
# summary of an existing log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

summary() {
    awk '
    /^[^ ]+ rows / {
        label = $1
        for (i = 2; i <= NF; i++) {
            if ($i == "ratio") ratio = $(i + 1)
            if ($i == "CPU-s/M") cpu = $(i - 1)
            if ($i == "RSS") rss = $(i + 1)
        }
        if (!(label in n)) order[++k] = label
        n[label]++; sum[label] += cpu; rsum[label] += ratio
        if (!(label in lo) || cpu < lo[label]) lo[label] = cpu
        if (!(label in hi) || cpu > hi[label]) hi[label] = cpu
        if (rss > rmax[label]) rmax[label] = rss
        runs[label] = runs[label] " " cpu
    }
    END {
        for (j = 1; j <= k; j++) {
            l = order[j]
            printf "%-12s runs %d  CPU-s/M rows mean %.3f (%.2f M rows/CPU-s)  low %.3f  high %.3f  ratio mean %.2f  peak RSS %d MB  [%s ]\n",
                l, n[l], sum[l] / n[l], n[l] / sum[l], lo[l], hi[l], rsum[l] / n[l], rmax[l], runs[l]
        }
    }' "$1"
}

if [[ ${1:-} == summary ]]; then
    [[ $# -eq 2 ]] || { echo "usage: backfill_ab.sh summary LOG" >&2; exit 2; }
    summary "$2"
    exit 0
fi
if [[ $# -lt 3 ]]; then
    echo "usage: backfill_ab.sh ROUNDS LOG 'label|firn binary|VAR=value ...' ..." >&2
    exit 2
fi
rounds=$1 log=$2
shift 2
specs=("$@")
for spec in "${specs[@]}"; do
    IFS='|' read -r label bin _ <<<"$spec"
    [[ -n $label && $label != *" "* ]] || { echo "backfill_ab.sh: bad label in '$spec'" >&2; exit 2; }
    [[ -x $bin ]] || { echo "backfill_ab.sh: '$bin' is not an executable firn" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/firn-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < rounds; r++)); do
    order=("${specs[@]}")
    if ((r % 2)); then
        order=()
        for ((i = ${#specs[@]} - 1; i >= 0; i--)); do order+=("${specs[$i]}"); done
    fi
    for spec in "${order[@]}"; do
        IFS='|' read -r label bin vars <<<"$spec"
        rm -rf "$tmp/w" && mkdir "$tmp/w"
        # shellcheck disable=SC2086 # vars holds VAR=value words
        out=$(env $vars WORKDIR="$tmp/w" bash "$here/backfill_quick.sh" "$bin" 2>&1) || true
        if line=$(grep '^rows ' <<<"$out"); then
            echo "$label $line" | tee -a "$log"
        else
            echo "backfill_ab.sh: the run of $label failed:" >&2
            tail -5 <<<"$out" >&2
        fi
    done
done
summary "$log"
