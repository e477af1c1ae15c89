# SPDX-License-Identifier: Apache-2.0
# firn_module(<name> SOURCES ... DEPS ...): one static library per module (STYLE.md §1).
# The library is called firn_<name>, sees include/ publicly and its own folder privately.
function(firn_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(firn_${name} STATIC ${M_SOURCES})
  target_include_directories(firn_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                             PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(firn_${name} PUBLIC ${M_DEPS})
  set_property(GLOBAL APPEND PROPERTY FIRN_MODULES firn_${name})
endfunction()
