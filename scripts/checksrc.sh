#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Source checks that the compiler does not make (STYLE.md §6): banned C library functions
# anywhere, and raw allocation outside src/util/ and tests/. Prints file:line: text per finding.
set -euo pipefail
cd "$(dirname "$0")/.."

DIRS=(src include tests fuzz bench)
BANNED='strcpy|strcat|strncpy|sprintf|vsprintf|gets|strtok|atoi|atol|sscanf'
RAW_ALLOC='malloc|calloc|realloc|free|strdup'

existing=()
for d in "${DIRS[@]}"; do
    [[ -d $d ]] && existing+=("$d")
done
if ((${#existing[@]} == 0)); then
    echo "checksrc: no sources, ok"
    exit 0
fi

mapfile -d '' files < <(find "${existing[@]}" -path tests/data -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
if ((${#files[@]} == 0)); then
    echo "checksrc: no sources, ok"
    exit 0
fi

# A call is the name not preceded by an identifier character or member access, then "(".
# Comments and string literals are not parsed; write around the names there.
call_re() { printf '(^|[^A-Za-z0-9_.>])(%s)[[:space:]]*\\(' "$1"; }

findings=0
# report WHAT-ALTERNATION LABEL FILES...: one "file:line: LABEL 'name'" per call found.
report() {
    local what=$1 label=$2
    shift 2
    local out
    out=$(grep -nHoE "$(call_re "$what")" "$@" |
        sed -E "s#^([^:]+:[0-9]+):[^A-Za-z0-9_]?($what)[[:space:]]*\\(\$#\\1: $label '\\2'#" || true)
    if [[ -n $out ]]; then
        printf '%s\n' "$out"
        findings=$((findings + $(printf '%s\n' "$out" | wc -l)))
    fi
}

report "$BANNED" "banned function" "${files[@]}"

alloc_files=()
for f in "${files[@]}"; do
    case $f in
    src/util/* | tests/*) ;;
    *) alloc_files+=("$f") ;;
    esac
done
if ((${#alloc_files[@]} > 0)); then
    report "$RAW_ALLOC" "raw allocation outside src/util/" "${alloc_files[@]}"
fi

if ((findings > 0)); then
    echo "checksrc: $findings finding(s): banned function (use firn_parse_*/firn_buf_*) or raw" \
        "allocation outside src/util/ (use firn_malloc and friends)" >&2
    exit 1
fi
echo "checksrc: ${#files[@]} files ok"
