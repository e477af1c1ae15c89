# SPDX-License-Identifier: Apache-2.0
# firn_module(<name> SOURCES ... DEPS ...): one static library per module (STYLE.md §1).
# The library is called firn_<name>, sees include/ publicly and its own folder privately.
# A module without sources yet is an INTERFACE library, so modules above it still link.
function(firn_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  if(M_SOURCES)
    add_library(firn_${name} STATIC ${M_SOURCES})
    target_include_directories(firn_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                               PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(firn_${name} PUBLIC ${M_DEPS})
  else()
    add_library(firn_${name} INTERFACE)
    target_include_directories(firn_${name} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(firn_${name} INTERFACE ${M_DEPS})
  endif()
  set_property(GLOBAL APPEND PROPERTY FIRN_MODULES firn_${name})
endfunction()
