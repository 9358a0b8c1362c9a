// env_value: see env_knobs.hpp.
#include "common/env_knobs.hpp"

#include <cstdlib>

namespace muster {

std::optional<std::string> env_value(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

}  // namespace muster
