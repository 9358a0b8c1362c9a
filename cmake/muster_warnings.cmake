# muster_target_warnings(TARGET): the warning flags for muster's own code.
# Third-party headers come in as SYSTEM includes through their imported targets, so -Werror
# applies to our code only.
function(muster_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Werror>)
endfunction()
