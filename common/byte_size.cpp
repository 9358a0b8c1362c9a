// Byte sizes: see byte_size.hpp.
#include "common/byte_size.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "common/error.hpp"

namespace muster {
namespace {

constexpr std::array<std::pair<std::string_view, double>, 13> kUnits = {{
    {"b", 1.0},
    {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
    {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
    {"k", 1024.0}, {"m", 1048576.0}, {"g", 1073741824.0}, {"t", 1099511627776.0},
}};

}  // namespace

std::int64_t parse_byte_size(std::string_view text, std::string_view what) {
  auto fail = [&](std::string_view why) {
    MUSTER_THROW(errc::invalid_input, "{}: \"{}\": {}; e.g. 80GiB, 141GB or 512MiB", what, text,
                 why);
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) fail("expected a number");
  double number = 0;
  std::string digits(text.substr(0, i));
  char* end = nullptr;
  number = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) fail("not a number");
  std::string unit;
  for (char ch : text.substr(i))
    if (!std::isspace(static_cast<unsigned char>(ch)))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (unit.empty()) fail("give a unit");
  for (auto [name, scale] : kUnits)
    if (unit == name) {
      double bytes = std::round(number * scale);
      if (!(bytes >= 1 && bytes < 9.0e18)) fail("out of range");
      return static_cast<std::int64_t>(bytes);
    }
  fail(fmt::format("unknown unit \"{}\" (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", unit));
  return 0;
}

std::string format_bytes(std::int64_t bytes) {
  constexpr std::array<std::string_view, 5> kNames = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (std::llabs(bytes) < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  value /= 1024.0;
  while (std::fabs(value) >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kNames[unit]);
}

}  // namespace muster
