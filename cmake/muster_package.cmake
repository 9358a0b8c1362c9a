# `make package`: three Debian packages (CPack DEB, one per install component, see
# muster_install.cmake), their Depends from dpkg-shlibdeps plus the packages named here, and
# the maintainer scripts and conffiles in packaging/debian/<package>/.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME muster)
set(CPACK_PACKAGE_VENDOR "muster")
set(CPACK_PACKAGE_CONTACT "muster maintainers <muster@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description below starts with its own summary line. CPackDeb prepends the
# project's summary to it unless the summary is CPack's default text: give it that.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL muster musterd slurm)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/muster/muster")
set(_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

# The SPANK plugin works only with the Slurm release whose headers it was built against.
file(STRINGS /usr/include/slurm/slurm_version.h _slurm_version_line
  REGEX "^#define SLURM_VERSION_NUMBER")
string(REGEX MATCH "0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])" _ "${_slurm_version_line}")
math(EXPR _slurm_major "0x${CMAKE_MATCH_1}")
math(EXPR _slurm_minor "0x${CMAKE_MATCH_2}")
math(EXPR _slurm_next_minor "${_slurm_minor} + 1")
set(_slurm_release "${_slurm_major}.${_slurm_minor}")
if(_slurm_minor LESS 10)
  set(_slurm_release "${_slurm_major}.0${_slurm_minor}")
endif()
set(_slurm_next "${_slurm_major}.${_slurm_next_minor}")
if(_slurm_next_minor LESS 10)
  set(_slurm_next "${_slurm_major}.0${_slurm_next_minor}")
endif()

set(CPACK_DEBIAN_MUSTER_PACKAGE_NAME muster)
set(CPACK_DEBIAN_MUSTER_DESCRIPTION
  "Slurm-native launcher and MoE training engine\nmuster lays out, starts and supervises the ranks of Mixture-of-Experts training jobs\non one machine (muster run) or across the nodes of a Slurm job (muster launch,\nmuster-sbatch), with status, diagnose and report for OOM and timeout triage, and\nmuster-train, its built-in LibTorch engine.")
# LibTorch without OpenBLAS's threaded build falls back to the reference BLAS (16x slower)
set(CPACK_DEBIAN_MUSTER_PACKAGE_DEPENDS "libopenblas0-pthread")
set(CPACK_DEBIAN_MUSTER_PACKAGE_RECOMMENDS "musterd, slurm-client")

set(CPACK_DEBIAN_MUSTERD_PACKAGE_NAME musterd)
set(CPACK_DEBIAN_MUSTERD_DESCRIPTION
  "muster's node daemon\nmusterd decides the GPU environment of every job step on its node (NCCL settings,\nCUDA_DEVICE_MAX_CONNECTIONS, allocator conflicts), checks the node before a step\nstarts and keeps the node's history in SQLite. Runs under systemd.")
set(CPACK_DEBIAN_MUSTERD_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_MUSTERD_PACKAGE_RECOMMENDS "muster (= ${_deb_version})")
set(CPACK_DEBIAN_MUSTERD_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/packaging/debian/musterd/conffiles
  ${CMAKE_SOURCE_DIR}/packaging/debian/musterd/postinst
  ${CMAKE_SOURCE_DIR}/packaging/debian/musterd/prerm
  ${CMAKE_SOURCE_DIR}/packaging/debian/musterd/postrm)

set(CPACK_DEBIAN_SLURM_PACKAGE_NAME muster-slurm)
set(CPACK_DEBIAN_SLURM_DESCRIPTION
  "muster's Slurm plugin, prolog and epilog\nThe SPANK plugin gives every task of every job step the node's GPU environment\npolicy from musterd; the prolog drains a node that fails musterd's preflight and\nthe epilog closes the job's records.")
set(CPACK_DEBIAN_SLURM_PACKAGE_DEPENDS
  "muster (= ${_deb_version}), slurm-wlm-basic-plugins (>= ${_slurm_release}), slurm-wlm-basic-plugins (<< ${_slurm_next})")
set(CPACK_DEBIAN_SLURM_PACKAGE_RECOMMENDS "musterd (= ${_deb_version})")
set(CPACK_DEBIAN_SLURM_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/packaging/debian/muster-slurm/conffiles)

include(CPack)
