#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# firn serve on the demo's database (docs/serve.md): run scripts/demo.sh first; it builds firn
# and leaves its PostgreSQL running. Prints what to enter in the UI for the demo's source and a
# local destination, then runs `firn serve` in the foreground (Ctrl-C stops it), which prints
# the URL to open and the one-time setup token.
#
# Environment: FIRN_SERVE_LISTEN (default 127.0.0.1:8000).
set -euo pipefail
cd "$(dirname "$0")/.."
FIRN=build/release/src/cli/firn
SRC=.firn/demo/source.json
[[ -x $FIRN && -f $SRC ]] || {
    echo "demo_serve: run scripts/demo.sh first (it builds $FIRN and writes $SRC)" >&2
    exit 1
}
DATA=$PWD/.firn/serve
LAKE=$PWD/.firn/serve-lake
mkdir -p "$DATA" "$LAKE/warehouse"
field() { sed -n "s/^ *\"$1\": *\"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\},\\{0,1\\}$/\\1/p" "$SRC"; }
cat <<TEXT
demo_serve: in the UI, add
  a source:      host $(field host), port $(field port), database $(field database), user $(field username), TLS disable
  a destination: SQL catalog, warehouse $LAKE/warehouse, catalog URI sqlite:///$LAKE/catalog.db
then a job with the tables you want, and press Run now.
TEXT
exec "$FIRN" serve --data "$DATA" --listen "${FIRN_SERVE_LISTEN:-127.0.0.1:8000}"
