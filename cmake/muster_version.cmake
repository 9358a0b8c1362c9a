# Version and git commit, baked into common/version.hpp at configure time.
set(MUSTER_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${CMAKE_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _commit
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _commit)
    set(MUSTER_GIT_COMMIT ${_commit})
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/common/version.hpp.in
  ${CMAKE_BINARY_DIR}/generated/muster/version.hpp @ONLY)
