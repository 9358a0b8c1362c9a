# Where `make install` and the Debian packages put muster, by package (CPack component). The
# same table is in docs/install.md, and packaging/test-install.sh checks each path against it.
#   muster        /usr/bin/{muster,muster-train,muster-sbatch}, examples, docs, man pages
#   musterd       /usr/bin/musterd, its systemd unit, /etc/muster/musterd.toml
#   muster-slurm  the SPANK plugin in Slurm's plugin directory, its plugstack.conf.d snippet,
#                 the prolog and epilog, /etc/default/muster-slurm
include(GNUInstallDirs)

# Debian's Slurm loads plugins from /usr/lib/<multiarch>/slurm-wlm (RHEL's: /usr/lib64/slurm).
set(MUSTER_SLURM_PLUGIN_DIR "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm" CACHE PATH
  "muster: Slurm's plugin directory, where spank_muster.so is installed")
set(MUSTER_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE PATH
  "muster: where musterd.service is installed")
set(MUSTER_LIBEXEC_DIR "lib/muster" CACHE PATH
  "muster: the prolog and epilog (slurm.conf Prolog=/Epilog=), under the prefix")

# muster
install(TARGETS muster muster-sbatch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT muster)
if(TARGET muster-train)
  install(TARGETS muster-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT muster)
endif()
install(FILES etc/examples/job.toml etc/examples/tiny-moe.toml etc/examples/qwen3-30b-a3b.toml
  etc/examples/muster.sbatch DESTINATION ${CMAKE_INSTALL_DATADIR}/muster/examples
  COMPONENT muster)
install(DIRECTORY etc/examples/hf-configs DESTINATION ${CMAKE_INSTALL_DATADIR}/muster/examples
  COMPONENT muster)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT muster)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT muster
  FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE)

# man pages, gzipped as Debian ships them
set(MUSTER_MAN_PAGES muster.1 muster-sbatch.1 muster-train.1 musterd.8)
set(_man_outputs)
foreach(page IN LISTS MUSTER_MAN_PAGES)
  set(_out ${CMAKE_BINARY_DIR}/man/${page}.gz)
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND gzip -9 -n -c ${CMAKE_SOURCE_DIR}/docs/man/${page} > ${_out}
    DEPENDS ${CMAKE_SOURCE_DIR}/docs/man/${page}
    COMMENT "muster: man page ${page}" VERBATIM)
  list(APPEND _man_outputs ${_out})
  string(REGEX MATCH "[0-9]$" _section ${page})
  if(page STREQUAL "musterd.8")
    set(_component musterd)
  else()
    set(_component muster)
  endif()
  install(FILES ${_out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section} COMPONENT ${_component})
endforeach()
add_custom_target(muster_man_pages ALL DEPENDS ${_man_outputs})

# musterd
install(TARGETS musterd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT musterd)
install(FILES etc/systemd/musterd.service DESTINATION ${MUSTER_SYSTEMD_UNIT_DIR}
  COMPONENT musterd)
install(FILES etc/musterd.toml DESTINATION /etc/muster COMPONENT musterd)

# muster-slurm: the snippet names the plugin where this build installs it
file(READ etc/slurm/plugstack.conf.d/muster.conf _snippet)
string(REPLACE "/usr/lib/x86_64-linux-gnu/slurm-wlm/" "${MUSTER_SLURM_PLUGIN_DIR}/" _snippet
  "${_snippet}")
file(WRITE ${CMAKE_BINARY_DIR}/packaging/plugstack.conf.d/muster.conf "${_snippet}")
if(TARGET spank_muster)
  install(TARGETS spank_muster LIBRARY DESTINATION ${MUSTER_SLURM_PLUGIN_DIR} COMPONENT slurm)
endif()
install(FILES ${CMAKE_BINARY_DIR}/packaging/plugstack.conf.d/muster.conf
  DESTINATION /etc/slurm/plugstack.conf.d COMPONENT slurm)
install(PROGRAMS slurm/prolog/muster-prolog slurm/epilog/muster-epilog
  DESTINATION ${MUSTER_LIBEXEC_DIR} COMPONENT slurm)
install(FILES etc/default/muster-slurm DESTINATION /etc/default COMPONENT slurm)
