#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 6's memory figure: peak RSS of `firn sync` while it replays one 2 GB source transaction
# (streamed, spilled, committed in parts), with the table compared to the source afterwards.
# The run itself is tests/long/big_txn.sh (release build, throwaway PostgreSQL, ~3-5 minutes,
# ~6 GB free in $TMPDIR); this wrapper only gives it a place among the benchmarks. It prints
#   big transaction: 2048 MB of rows (... MiB of WAL), loaded in ...s; firn sync ...s, peak RSS ... MiB
# and fails when the peak passes FIRN_BIG_TXN_RSS_MB (default 512).
#
#   bash bench/big_txn.sh                        # 2 GB
#   FIRN_BIG_TXN_MB=512 bash bench/big_txn.sh    # another size
exec bash "$(dirname "$0")/../tests/long/big_txn.sh" "$@"
