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
    case errc::internal: return "internal";
  }
  return "unknown";
}

error::error(errc category, std::string message, std::source_location where)
    : std::runtime_error(std::move(message)), category_(category), where_(where) {}

std::string error::where() const {
  std::string_view file = where_.file_name();
  // Trim the build machine's path down to the path inside the repository.
  for (std::string_view top : {"/common/", "/launcher/", "/daemon/", "/engine/", "/kernels/", "/tests/"}) {
    if (auto pos = file.rfind(top); pos != std::string_view::npos) {
      file.remove_prefix(pos + 1);
      break;
    }
  }
  return fmt::format("{}:{}", file, where_.line());
}

}  // namespace muster
