# SPDX-License-Identifier: Apache-2.0
# `cmake --install` layout (GNUInstallDirs under CMAKE_INSTALL_PREFIX):
#   bin/firn
#   share/doc/firn/{README.md, copyright, *.md from docs/}
#   share/doc/firn/examples/{source,destination,streams}.json, firn.env
#   share/doc/firn/deploy/{Dockerfile, kubernetes/, grafana/, prometheus/} (when present)
#   lib/systemd/system/firn@.service (FIRN_SYSTEMD_UNITDIR; paths in it follow the prefix)
# scripts/package.sh turns an install into a Debian package.
include(GNUInstallDirs)

set(FIRN_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "Where to install firn@.service, relative to CMAKE_INSTALL_PREFIX or absolute")

install(TARGETS firn RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES deploy/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB FIRN_DOCS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${FIRN_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/internals DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES deploy/examples/source.json deploy/examples/destination.json
              deploy/examples/streams.json deploy/examples/firn.env
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
foreach(dir docker kubernetes grafana prometheus)
  if(EXISTS ${CMAKE_SOURCE_DIR}/deploy/${dir})
    install(DIRECTORY deploy/${dir} DESTINATION ${CMAKE_INSTALL_DOCDIR}/deploy)
  endif()
endforeach()

# The unit names the installed binary and the configuration folder of the prefix configured
# (/usr -> /usr/bin/firn and /etc/firn; /usr/local -> /usr/local/bin/firn, /usr/local/etc/firn);
# `cmake --install --prefix` moves the files, not these paths.
set(FIRN_BINDIR ${CMAKE_INSTALL_FULL_BINDIR})
set(FIRN_SYSCONFDIR ${CMAKE_INSTALL_FULL_SYSCONFDIR})
set(FIRN_DOCDIR ${CMAKE_INSTALL_FULL_DOCDIR})
configure_file(deploy/systemd/firn@.service.in ${CMAKE_BINARY_DIR}/deploy/firn@.service @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/deploy/firn@.service DESTINATION ${FIRN_SYSTEMD_UNITDIR})
