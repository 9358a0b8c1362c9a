// Opening a library at run time: see shared_library.hpp.
#include "common/shared_library.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace muster {

shared_library::shared_library(const char* what, std::initializer_list<const char*> sonames)
    : what_(what) {
  std::string tried, last_error;
  for (const char* name : sonames) {
    handle_ = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (handle_ != nullptr) {
      soname_ = name;
      return;
    }
    tried += (tried.empty() ? "" : ", ") + std::string(name);
    if (const char* e = dlerror()) last_error = e;
  }
  throw std::runtime_error(what_ + " could not be loaded (tried " + tried + "): " + last_error +
                           "; put its folder on LD_LIBRARY_PATH (e.g. /usr/local/cuda/lib64, or "
                           "the nvidia/*/lib folders of the PyTorch installation)");
}

void* shared_library::find(const char* name) const {
  return dlsym(handle_, name);
}

void* shared_library::require(const char* name) const {
  void* p = find(name);
  if (p == nullptr)
    throw std::runtime_error(what_ + " (" + soname_ + ") has no " + name +
                             ": it is older than this build expects");
  return p;
}

}  // namespace muster
