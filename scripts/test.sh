#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command: set up the machine, check formatting and banned calls, build the asan preset
# with -Werror, run CTest (unit + integration) and the pytest interop suite. Exits non-zero on
# any failure and when no test ran. Logs go to build/test-logs/.
#
# Environment: FIRN_CACHE (see setup.sh), FIRN_SKIP_SETUP=1 to skip setup.sh,
#              FIRN_PYTEST_ARGS (extra pytest arguments, split as a shell splits words, quotes
#              included: e.g. "-k harness" or "-k 'copy or types'").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PRESET=asan
LOG_DIR=$ROOT/build/test-logs
VENV_PY=${FIRN_CACHE:-$HOME/.cache/firn}/venv/bin/python
export FIRN_BUILD_DIR=${FIRN_BUILD_DIR:-$ROOT/build/$PRESET}
export FIRN_BIN=${FIRN_BIN:-$FIRN_BUILD_DIR/src/cli/firn}

failed=()
ctest_total=0
ctest_failed=0
py_passed=0
py_failed=0
START_S=$SECONDS

step() {
    printf '\n==> %s\n' "$*"
}

# run_step NAME CMD...: run CMD, remember NAME on failure; returns CMD's status.
run_step() {
    local name=$1 rc=0 t0=$SECONDS
    shift
    step "$name"
    "$@" || rc=$?
    if ((rc != 0)); then
        failed+=("$name")
        printf '==> %s failed (exit %d, %ds)\n' "$name" "$rc" $((SECONDS - t0))
    else
        printf '==> %s ok (%ds)\n' "$name" $((SECONDS - t0))
    fi
    return "$rc"
}

summary() {
    local passed=$((ctest_total - ctest_failed + py_passed))
    local nfailed=$((ctest_failed + py_failed))
    printf '\n'
    if ((${#failed[@]} > 0)); then
        printf 'test.sh: FAILED steps: %s (%ds)\n' "${failed[*]}" $((SECONDS - START_S))
        ((nfailed > 0)) || nfailed=1
    else
        printf 'test.sh: all steps ok (%ds): ctest %d tests, pytest %d passed\n' \
            $((SECONDS - START_S)) "$ctest_total" "$py_passed"
    fi
    printf 'summary: %d passed, %d failed\n' "$passed" "$nfailed"
}

finish() {
    summary
    if ((${#failed[@]} > 0)); then
        exit 1
    fi
    exit 0
}

if [[ ${FIRN_SKIP_SETUP:-} != 1 ]]; then
    run_step setup bash scripts/setup.sh || finish
fi
[[ -x $VENV_PY ]] || {
    failed+=(setup)
    echo "test.sh: no venv python at $VENV_PY (run scripts/setup.sh)" >&2
    finish
}

mkdir -p "$LOG_DIR"
run_step check_format bash scripts/check_format.sh || true
run_step checksrc bash scripts/checksrc.sh || true

run_step configure cmake --preset "$PRESET" -DFIRN_WERROR=ON || finish
run_step build cmake --build --preset "$PRESET" -j2 || finish

run_ctest() {
    local rc=0 line
    ctest --preset "$PRESET" --output-on-failure --no-tests=error 2>&1 | tee "$LOG_DIR/ctest.log" ||
        rc=$?
    # "100% tests passed, 0 tests failed out of 42"
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$LOG_DIR/ctest.log" | tail -n1 || true)
    if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
        ctest_failed=${BASH_REMATCH[1]}
        ctest_total=${BASH_REMATCH[2]}
    fi
    if ((rc == 0 && ctest_total == 0)); then
        echo "test.sh: ctest ran no tests" >&2
        return 1
    fi
    return "$rc"
}
run_step ctest run_ctest || true

run_pytest() {
    local rc=0 line extra=()
    if [[ -n ${FIRN_PYTEST_ARGS:-} ]]; then # split with shlex (no eval): quoted -k expressions
        mapfile -d '' -t extra < <("$VENV_PY" -c 'import shlex, sys
sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' "$FIRN_PYTEST_ARGS")
    fi
    tests/harness/pg_cluster.sh run -- "$VENV_PY" -m pytest tests/interop -q -p no:cacheprovider \
        "${extra[@]}" 2>&1 | tee "$LOG_DIR/pytest.log" || rc=$?
    line=$(grep -E '^=*[ ]*[0-9]+ (passed|failed)|no tests ran' "$LOG_DIR/pytest.log" | tail -n1 || true)
    [[ $line =~ ([0-9]+)\ passed ]] && py_passed=${BASH_REMATCH[1]}
    [[ $line =~ ([0-9]+)\ failed ]] && py_failed=${BASH_REMATCH[1]}
    [[ $line =~ ([0-9]+)\ error ]] && py_failed=$((py_failed + BASH_REMATCH[1]))
    if ((rc == 5)); then
        if compgen -G 'tests/interop/test_*.py' >/dev/null; then
            echo "test.sh: pytest collected no tests although tests/interop has test files" >&2
            return 5
        fi
        echo "test.sh: no interop tests yet"
        return 0
    fi
    return "$rc"
}
run_step pytest run_pytest || true

finish
