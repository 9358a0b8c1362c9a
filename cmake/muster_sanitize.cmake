# MUSTER_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer for everything built.
# Used by `make test-asan` for the non-LibTorch parts (LibTorch itself is not instrumented).
if(MUSTER_SANITIZE)
  set(_muster_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # C and C++ only: nvcc does not take these flags (CUDA code is never built with sanitizers).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_muster_san}>")
  add_link_options(${_muster_san})
  message(STATUS "muster: sanitizers: address, undefined")
endif()
