# muster_target_warnings(TARGET): the warning flags for muster's own code.
# Third-party headers come in as SYSTEM includes through their imported targets, so -Werror
# applies to our code only. MUSTER_WERROR=OFF keeps the warnings but lets them pass: for a first
# build against a newer toolchain or LibTorch (tools/gpu/build.sh BUILD -DMUSTER_WERROR=OFF),
# to see every new warning in one build; CI always builds with it ON.
# Also maps the source directory away from __FILE__ (and so std::source_location), so error
# locations read "common/hostlist.cpp:120" whatever the checkout's path.
option(MUSTER_WERROR "muster: treat warnings in muster's own code as errors" ON)
function(muster_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra $<$<BOOL:${MUSTER_WERROR}>:-Werror>
    -fmacro-prefix-map=${CMAKE_SOURCE_DIR}/=>)
endfunction()
