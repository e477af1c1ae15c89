# SPDX-License-Identifier: Apache-2.0
# Third-party libraries, found through pkg-config where Debian ships a .pc file.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(PQ REQUIRED IMPORTED_TARGET libpq)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(OPENSSL REQUIRED IMPORTED_TARGET openssl)
# libmariadb (Connector/C, LGPL-2.1, linked dynamically): the MySQL/MariaDB source.
pkg_check_modules(MARIADB REQUIRED IMPORTED_TARGET libmariadb)
# libmicrohttpd (LGPL-2.1, linked dynamically) serves --metrics-listen.
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
find_library(SNAPPY_LIB snappy REQUIRED)
find_path(SNAPPY_INCLUDE snappy-c.h REQUIRED)
add_library(firn_snappy INTERFACE)
target_link_libraries(firn_snappy INTERFACE ${SNAPPY_LIB})
target_include_directories(firn_snappy INTERFACE ${SNAPPY_INCLUDE})
# Optional: liblz4 lets the Parquet reader decode LZ4_RAW pages (else FIRN_ERR_UNSUPPORTED).
pkg_check_modules(LZ4 IMPORTED_TARGET liblz4)
