# cmake -DSOURCE_DIR=... -DVERSION=... -DOUTPUT=... -P muster_version_stamp.cmake
# Writes OUTPUT from common/version.hpp.in with the checkout's commit ("unknown" outside git),
# touching it only when its text changes.
set(MUSTER_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE _commit
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _commit)
    set(MUSTER_GIT_COMMIT ${_commit})
  endif()
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${SOURCE_DIR}/common/version.hpp.in ${OUTPUT} @ONLY)
