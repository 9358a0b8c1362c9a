# Version and git commit, written to generated/muster/version.hpp. The commit is read again at
# every build (the muster_version target), so `--version` names the commit a binary was built
# from, not the one CMake last configured at; the header changes only when the commit does.
set(MUSTER_VERSION_HEADER ${CMAKE_BINARY_DIR}/generated/muster/version.hpp)
add_custom_target(muster_version
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DVERSION=${PROJECT_VERSION}
          -DOUTPUT=${MUSTER_VERSION_HEADER} -P ${CMAKE_SOURCE_DIR}/cmake/muster_version_stamp.cmake
  BYPRODUCTS ${MUSTER_VERSION_HEADER}
  COMMENT "muster: version header"
  VERBATIM)
# configure time too, so that the header exists before the first build
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
  -DVERSION=${PROJECT_VERSION} -DOUTPUT=${MUSTER_VERSION_HEADER}
  -P ${CMAKE_SOURCE_DIR}/cmake/muster_version_stamp.cmake)
