#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The 2 GB single-transaction CDC check (issue 6), too long for the default test command:
# tests/interop/test_cdc_big_txn.py at FIRN_BIG_TXN_MB (default 2048) against the release build,
# in a throwaway PostgreSQL. It prints the transaction's size, firn's wall time and peak RSS, and
# fails when the table differs from the source or the peak RSS passes FIRN_BIG_TXN_RSS_MB
# (default 512). Needs about 3x the size free in $TMPDIR (spill file) and in the cluster's folder.
#
#   bash tests/long/big_txn.sh                       # 2 GB, default memory limit
#   FIRN_BIG_TXN_MB=512 bash tests/long/big_txn.sh   # another size
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV_PY=${FIRN_CACHE:-$HOME/.cache/firn}/venv/bin/python
export FIRN_BIG_TXN_MB=${FIRN_BIG_TXN_MB:-2048}
export FIRN_BIG_TXN_RSS_MB=${FIRN_BIG_TXN_RSS_MB:-512}
if [[ -z ${FIRN_BIN:-} ]]; then
    cmake --preset release >/dev/null
    cmake --build --preset release -j2 >/dev/null
    export FIRN_BIN=$PWD/build/release/src/cli/firn
fi
exec bash tests/harness/pg_cluster.sh run -- "$VENV_PY" -m pytest tests/interop/test_cdc_big_txn.py \
    -x -q -s -p no:cacheprovider "$@"
