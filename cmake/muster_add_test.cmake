# muster_add_test(NAME <name> SOURCES <files...> [LIBS <targets...>] LABELS unit|integration|gpu [slurm]
#                 [TIMEOUT <seconds>])
# The one way tests are registered: a Catch2 executable whose TEST_CASEs become CTest tests,
# each carrying the labels (so `ctest -L unit` works). Tests find built programs through
# MUSTER_BIN_DIR and the source tree through MUSTER_SOURCE_DIR.
add_library(muster_catch_main STATIC ${CMAKE_SOURCE_DIR}/tests/support/catch_main.cpp)
target_link_libraries(muster_catch_main PUBLIC Catch2::Catch2)

include(Catch)

# muster_discovered_tests_property(TARGET PROPERTY VALUE): sets PROPERTY to VALUE (a list is
# fine) on every test CTest discovers in TARGET, once the discovery's own file has run.
function(muster_discovered_tests_property target property value)
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${target}_${property}.cmake)
  set(text [=[
file(GLOB discovered "${CMAKE_CURRENT_LIST_DIR}/@TARGET@_tests-*.cmake")
foreach(tests_file IN LISTS discovered)
  file(STRINGS "${tests_file}" lines REGEX "^add_test[(] [[]=*[[]")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^add_test[(] [[]=*[[]([^]]*)[]].*" "\\1" name "${line}")
    set_tests_properties("${name}" PROPERTIES @PROPERTY@ "@VALUE@")
  endforeach()
endforeach()
]=])
  string(REPLACE "@TARGET@" "${target}" text "${text}")
  string(REPLACE "@PROPERTY@" "${property}" text "${text}")
  string(REPLACE "@VALUE@" "${value}" text "${text}")
  file(WRITE ${file} "${text}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()
function(muster_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_NAME OR NOT T_SOURCES OR NOT T_LABELS)
    message(FATAL_ERROR "muster_add_test: NAME, SOURCES and LABELS are required")
  endif()
  set(_extra ${T_LABELS})
  list(POP_FRONT _extra _kind)
  if(NOT _kind MATCHES "^(unit|integration|gpu)$")
    message(FATAL_ERROR "muster_add_test(${T_NAME}): LABELS must start with unit, integration or gpu")
  endif()
  foreach(_label IN LISTS _extra)
    if(NOT _label STREQUAL "slurm")
      message(FATAL_ERROR "muster_add_test(${T_NAME}): extra label ${_label}: only slurm is known")
    endif()
  endforeach()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE muster_catch_main muster_test_support ${T_LIBS})
  target_compile_definitions(${T_NAME} PRIVATE
    MUSTER_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
    MUSTER_TEST_BIN_DIR="${CMAKE_BINARY_DIR}/tests"
    MUSTER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  muster_target_warnings(${T_NAME})
  # --warn NoTests: a name CTest cannot pass back to Catch (Catch.cmake cuts names at ';')
  # fails instead of passing with nothing run.
  catch_discover_tests(${T_NAME}
    TEST_PREFIX "${T_NAME}: "
    EXTRA_ARGS --warn NoTests
    PROPERTIES LABELS ${_kind} TIMEOUT ${T_TIMEOUT})
  if(_extra)  # Catch.cmake passes properties on as a flat list, so a list value goes this way
    muster_discovered_tests_property(${T_NAME} LABELS "${T_LABELS}")
  endif()
endfunction()

# muster_skip_when(TARGET REGEX): ctest reports a test of TARGET as Skipped when its output
# matches REGEX (tests print "SKIPPED: <reason>" when what they need cannot run here: Slurm,
# a GPU).
function(muster_skip_when target regex)
  muster_discovered_tests_property(${target} SKIP_REGULAR_EXPRESSION "${regex}")
endfunction()
