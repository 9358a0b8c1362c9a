// muster::error: see error.hpp.
#include "common/error.hpp"

namespace muster {

std::string_view to_string(errc category) {
  switch (category) {
    case errc::invalid_input: return "invalid_input";
    case errc::config: return "config";
    case errc::environment: return "environment";
    case errc::io: return "io";
    case errc::store: return "store";
    case errc::comm: return "comm";
    case errc::internal: return "internal";
  }
  return "unknown";
}

error::error(errc category, std::string message, std::source_location where)
    : std::runtime_error(std::move(message)), category_(category), where_(where) {}

std::string error::where() const {
  // Paths are relative to the repository: cmake/muster_warnings.cmake maps the source directory
  // away with -fmacro-prefix-map.
  return fmt::format("{}:{}", where_.file_name(), where_.line());
}

}  // namespace muster
