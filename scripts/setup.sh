#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what building and testing firn needs on a Debian 12 machine: build tools and -dev
# libraries, PostgreSQL 15, a Python virtualenv (outside the clone) for the interop tests, and the
# object-storage test servers (scripts/services.sh).
# Idempotent and quick on a second run: apt is skipped when every package is installed, pip
# when the venv's stamp matches the sha256 of scripts/requirements-test.txt.
#
# Environment: FIRN_CACHE (default ~/.cache/firn; the venv is $FIRN_CACHE/venv),
#              FIRN_PYTHON (interpreter for the venv, default: python3, 3.10 or newer).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

APT_PACKAGES=(
    build-essential cmake ninja-build pkg-config clang-format python3-venv
    libpq-dev libcurl4-openssl-dev libssl-dev libjansson-dev libzstd-dev libsnappy-dev
    zlib1g-dev libsqlite3-dev libmicrohttpd-dev liblz4-dev
    # curl and openssl commands: the object-storage test harnesses (tests/harness)
    curl openssl
    # Debian 12 ships the contrib modules inside postgresql-15 (it provides the virtual
    # postgresql-contrib-15); postgresql-contrib is the real package that pulls them in.
    postgresql-15 postgresql-contrib
)

CACHE_DIR=${FIRN_CACHE:-$HOME/.cache/firn}
VENV=$CACHE_DIR/venv
REQS=scripts/requirements-test.txt
STAMP=$VENV/.firn-requirements.sha256

as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

install_apt() {
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) != installed ]]; then
            missing+=("$pkg")
        fi
    done
    if ((${#missing[@]} == 0)); then
        say "system packages: all ${#APT_PACKAGES[@]} installed"
        return
    fi
    say "installing system packages: ${missing[*]}"
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    if ! as_root "${apt[@]}" "${missing[@]}"; then
        say "install failed; refreshing package lists and retrying"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        as_root "${apt[@]}" "${missing[@]}"
    fi
}

# Pick an interpreter of at least 3.10 that can make virtualenvs.
pick_python() {
    local cand
    for cand in ${FIRN_PYTHON:-} python3 python3.11 /root/.pyenv/shims/python3.11 /usr/bin/python3; do
        [[ -n $cand ]] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            echo "$cand"
            return
        fi
    done
    die "no python3 (3.10 or newer, with venv) found; set FIRN_PYTHON"
}

install_venv() {
    local want
    want=$(sha256sum "$REQS" | cut -d' ' -f1)
    if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
        if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]]; then
            say "python venv: up to date ($VENV)"
            return
        fi
    else
        local py
        py=$(pick_python)
        say "creating python venv $VENV with $py ($("$py" --version 2>&1))"
        rm -rf "$VENV"
        mkdir -p "$CACHE_DIR"
        "$py" -m venv "$VENV"
    fi
    say "installing python packages from $REQS"
    rm -f "$STAMP"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQS"
    install_duckdb_extensions
    echo "$want" >"$STAMP"
}

# Copy the iceberg and avro extensions from their PyPI packages into DuckDB's default extension
# folder, so a plain `INSTALL iceberg; LOAD iceberg` works without reaching the DuckDB servers.
# Then prove it in a fresh connection that may not auto-install anything.
install_duckdb_extensions() {
    say "installing DuckDB extensions iceberg, avro from their python packages"
    "$VENV/bin/python" - <<'EOF'
import duckdb
from duckdb_extensions import import_extension

con = duckdb.connect()
for name in ("avro", "iceberg"):
    import_extension(name, force_install=True, con=con)
con.close()

con = duckdb.connect(config={"autoinstall_known_extensions": False})
con.sql("INSTALL iceberg; LOAD iceberg; LOAD avro")
rows = con.sql("SELECT extension_name FROM duckdb_extensions() "
               "WHERE loaded AND extension_name IN ('iceberg', 'avro')").fetchall()
assert len(rows) == 2, rows
print(f"setup: duckdb {duckdb.__version__}: iceberg and avro load offline")
EOF
}

install_apt
install_venv
# Object-storage test services (versitygw, fake-gcs-server), go-installed into $CACHE_DIR/bin.
bash scripts/services.sh
say "done; venv python: $VENV/bin/python"
echo "$VENV/bin/python"
