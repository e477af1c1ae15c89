#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the test services the object-storage tests start (no Docker): versitygw, an
# Apache-2.0 S3-compatible gateway (posix backend), and fake-gcs-server, the GCS emulator.
# Both are `go install`ed from the Go module proxy into a cache outside the clone,
# ${FIRN_CACHE:-$HOME/.cache/firn}/bin. Idempotent: a binary whose version stamp matches is kept,
# so a second run takes well under a second.
#
# Environment: FIRN_CACHE (see setup.sh), GO (go command, default: go on PATH or /usr/local/go/bin/go).
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
FAKE_GCS_VERSION=v1.56.1

CACHE_DIR=${FIRN_CACHE:-$HOME/.cache/firn}
BIN=$CACHE_DIR/bin

say() { printf 'services: %s\n' "$*" >&2; }

find_go() {
    if [[ -n ${GO:-} ]]; then
        echo "$GO"
    elif command -v go >/dev/null 2>&1; then
        command -v go
    elif [[ -x /usr/local/go/bin/go ]]; then
        echo /usr/local/go/bin/go
    else
        return 1
    fi
}

# install NAME MODULE@VERSION: go install into $BIN unless the stamp says it is there.
install_one() {
    local name=$1 spec=$2 stamp=$BIN/.$1.version
    if [[ -x $BIN/$name && -f $stamp && $(cat "$stamp") == "$spec" ]]; then
        say "$name: up to date ($spec)"
        return
    fi
    local go
    go=$(find_go) || {
        say "error: no go toolchain found to install $name (set GO)"
        exit 1
    }
    say "installing $name ($spec) with $("$go" version | cut -d' ' -f3)"
    mkdir -p "$BIN"
    GOBIN=$BIN GOFLAGS=-buildvcs=false "$go" install "$spec"
    echo "$spec" >"$stamp"
}

install_one versitygw "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
install_one fake-gcs-server "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"
say "done; binaries in $BIN"
