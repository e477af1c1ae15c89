#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fail if any C source or header is not formatted per .clang-format (STYLE.md §10).
# With --fix, reformat the files in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null 2>&1 || {
    echo "check_format: $CLANG_FORMAT not found (run scripts/setup.sh)" >&2
    exit 1
}

existing=()
for d in src include tests fuzz bench; do
    [[ -d $d ]] && existing+=("$d")
done
files=()
if ((${#existing[@]} > 0)); then
    mapfile -d '' files < <(find "${existing[@]}" -path tests/data -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
fi
if ((${#files[@]} == 0)); then
    echo "check_format: no sources, ok"
    exit 0
fi

if [[ ${1:-} == --fix ]]; then
    "$CLANG_FORMAT" -i "${files[@]}"
    echo "check_format: reformatted ${#files[@]} files"
    exit 0
fi

if ! "$CLANG_FORMAT" --dry-run --Werror "${files[@]}"; then
    echo "check_format: files above need formatting (bash scripts/check_format.sh --fix)" >&2
    exit 1
fi
echo "check_format: ${#files[@]} files ok"
