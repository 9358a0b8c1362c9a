# muster_add_test(NAME <name> SOURCES <files...> [LIBS <targets...>] LABELS unit|integration|gpu
#                 [TIMEOUT <seconds>])
# The one way tests are registered: a Catch2 executable whose TEST_CASEs become CTest tests,
# each carrying the labels (so `ctest -L unit` works). Tests find built programs through
# MUSTER_BIN_DIR and the source tree through MUSTER_SOURCE_DIR.
add_library(muster_catch_main STATIC ${CMAKE_SOURCE_DIR}/tests/support/catch_main.cpp)
target_link_libraries(muster_catch_main PUBLIC Catch2::Catch2)

include(Catch)
function(muster_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_NAME OR NOT T_SOURCES OR NOT T_LABELS)
    message(FATAL_ERROR "muster_add_test: NAME, SOURCES and LABELS are required")
  endif()
  list(LENGTH T_LABELS _num_labels)
  if(NOT _num_labels EQUAL 1 OR NOT T_LABELS MATCHES "^(unit|integration|gpu)$")
    message(FATAL_ERROR "muster_add_test(${T_NAME}): LABELS must be one of unit, integration, gpu")
  endif()
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
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
