// muster::error, the one exception type of muster's own code, and the check macros that throw it.
//
// An error carries a category (what kind of failure, used to pick exit codes and run-store
// records), a message meant for the user (it names the input, the place and the fix), and the
// source location that raised it (for debug logs, never instead of a good message).
// Daemon handlers do not throw across their boundary; see CONVENTIONS.md, "Errors".
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace muster {

enum class errc {
  invalid_input,  // a value the user gave is malformed: a hostlist, an override, a CLI argument
  config,         // a config file or its values are wrong
  environment,    // the process environment (Slurm variables, CUDA_VISIBLE_DEVICES) is wrong
  io,             // a file or directory could not be read or written
  store,          // the SQLite run store failed
  comm,           // a collective between ranks failed or timed out
  internal,       // a bug in muster: a broken invariant
};

// Stable lower-case name of a category ("invalid_input", ...), for logs and JSON.
std::string_view to_string(errc category);

class error : public std::runtime_error {
 public:
  error(errc category, std::string message,
        std::source_location where = std::source_location::current());

  errc category() const noexcept { return category_; }
  // Where it was raised, "common/hostlist.cpp:120" (relative to the repository).
  std::string where() const;

 private:
  errc category_;
  std::source_location where_;
};

}  // namespace muster

// MUSTER_THROW(category, fmt, args...): throw muster::error with a formatted message.
#define MUSTER_THROW(category, ...) \
  throw ::muster::error((category), ::fmt::format(__VA_ARGS__))

// MUSTER_CHECK(cond, category, fmt, args...): throw when cond is false.
#define MUSTER_CHECK(cond, category, ...)     \
  do {                                        \
    if (!(cond)) MUSTER_THROW(category, __VA_ARGS__); \
  } while (0)

// MUSTER_ASSERT(cond): an internal invariant; failing it is a muster bug.
#define MUSTER_ASSERT(cond) \
  MUSTER_CHECK(cond, ::muster::errc::internal, "internal error: {} is false", #cond)
