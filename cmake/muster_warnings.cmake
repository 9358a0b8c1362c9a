# muster_target_warnings(TARGET): the warning flags for muster's own code.
# Third-party headers come in as SYSTEM includes through their imported targets, so -Werror
# applies to our code only.
# Also maps the source directory away from __FILE__ (and so std::source_location), so error
# locations read "common/hostlist.cpp:120" whatever the checkout's path.
function(muster_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Werror -fmacro-prefix-map=${CMAKE_SOURCE_DIR}/=>)
endfunction()
