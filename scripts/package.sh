#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the Debian package of this tree: configure a Release build for prefix /usr (no
# sanitizers), build the firn binary, `cmake --install --strip` it into a staging root, compute
# Depends from the binary's shared libraries with dpkg-shlibdeps, and pack the root with
# dpkg-deb. Prints the path of the .deb as its last line.
#
# The package holds /usr/bin/firn, /lib/systemd/system/firn@.service (not enabled: see README
# "Installing the package"), /usr/share/doc/firn (README, docs, examples/, deploy/).
#
# Environment: FIRN_PKG_BUILD_DIR (default build/package), FIRN_PKG_OUT (folder of the .deb,
#              default the build folder), FIRN_PKG_JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf 'package: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

BUILD=${FIRN_PKG_BUILD_DIR:-$ROOT/build/package}
OUT=${FIRN_PKG_OUT:-$BUILD}
JOBS=${FIRN_PKG_JOBS:-2}
for tool in cmake ninja dpkg-deb dpkg-shlibdeps; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool is missing (bash scripts/setup.sh installs it: cmake, ninja-build, dpkg-dev)"
done

say "configuring $BUILD (Release, prefix /usr)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIRN_SANITIZE= \
    -DCMAKE_INSTALL_PREFIX=/usr -DFIRN_SYSTEMD_UNITDIR=/lib/systemd/system >/dev/null
say "building firn"
cmake --build "$BUILD" -j"$JOBS" --target firn >/dev/null

VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
[[ -n $VERSION ]] || die "no project version in $BUILD/CMakeCache.txt"
ARCH=$(dpkg --print-architecture)
# The staging root is debian/firn of a minimal source folder, the layout dpkg-shlibdeps expects
# (debian/control, and the binary under a folder holding DEBIAN/).
PKGDIR=$BUILD/deb
STAGE=$PKGDIR/debian/firn
rm -rf "$PKGDIR"
mkdir -p "$PKGDIR/debian"
printf 'Source: firn\n\nPackage: firn\nArchitecture: any\n' >"$PKGDIR/debian/control"
DESTDIR=$STAGE cmake --install "$BUILD" --strip >/dev/null
[[ -x $STAGE/usr/bin/firn ]] || die "cmake --install left no $STAGE/usr/bin/firn"

mkdir -p "$STAGE/DEBIAN"
DEPENDS=$(cd "$PKGDIR" && dpkg-shlibdeps -O "debian/firn/usr/bin/firn" 2>"$PKGDIR/warnings" |
    sed -n 's/^shlibs:Depends=//p')
[[ -n $DEPENDS ]] || die "dpkg-shlibdeps found no dependencies: $(cat "$PKGDIR/warnings")"
[[ ! -s $PKGDIR/warnings ]] || die "dpkg-shlibdeps: $(cat "$PKGDIR/warnings")"

cat >"$STAGE/DEBIAN/control" <<CONTROL
Package: firn
Version: $VERSION
Architecture: $ARCH
Maintainer: firn developers <firn@localhost>
Section: database
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
Depends: $DEPENDS
Homepage: file:///usr/share/doc/firn/README.md
Description: change-data-capture from PostgreSQL into Apache Iceberg tables
 firn copies the rows of a PostgreSQL database and then tails its logical
 replication stream, committing both as Apache Iceberg tables (Parquet data
 and delete files) through an Iceberg REST catalog or an embedded SQLite
 catalog. The firn@.service unit runs one pipeline per instance from
 /etc/firn/NAME/ with its state under /var/lib/firn/NAME.
CONTROL
# The unit is installed, not enabled: tell a running systemd it is there, and that it is gone.
for script in postinst postrm; do
    cat >"$STAGE/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload || true
fi
exit 0
SCRIPT
    chmod 0755 "$STAGE/DEBIAN/$script"
done

mkdir -p "$OUT"
DEB=$OUT/firn_${VERSION}_${ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
say "built $DEB (Depends: $DEPENDS)"
echo "$DEB"
