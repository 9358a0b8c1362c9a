// A library opened at run time (dlopen) by the first of its sonames that loads, so the binaries
// start, and the CPU path runs, on machines without it; one already in the process (PyTorch's
// cuBLAS or NCCL) is reused. load() sets a function pointer declared with the type of the
// function's declaration in the library's header.
#pragma once

#include <initializer_list>
#include <string>

namespace muster {

class shared_library {
 public:
  // Throws std::runtime_error naming every soname tried and dlerror()'s last answer.
  shared_library(const char* what, std::initializer_list<const char*> sonames);
  shared_library(const shared_library&) = delete;
  shared_library& operator=(const shared_library&) = delete;
  // Never closed: handles of it may outlive any destructor order at exit.
  ~shared_library() = default;

  const std::string& soname() const { return soname_; }

  // nullptr when the library lacks it (an older version).
  void* find(const char* name) const;
  // Throws std::runtime_error naming the library and the symbol when it lacks it.
  void* require(const char* name) const;

  template <class P>
  void load(P& pointer, const char* name) const {
    pointer = reinterpret_cast<P>(require(name));
  }

 private:
  std::string what_;
  std::string soname_;
  void* handle_ = nullptr;
};

}  // namespace muster
