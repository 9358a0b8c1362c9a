// put(out, format, args...): formats onto the end of `out` (the report's HTML and SVG writers).
#pragma once

#include <fmt/format.h>

#include <iterator>
#include <string>
#include <utility>

namespace muster::launcher::report {

template <class... Args>
void put(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

}  // namespace muster::launcher::report
