// Picking fields out of one log line: see line_fields.hpp.
#include "launcher/diagnose/line_fields.hpp"

#include <algorithm>
#include <charconv>

namespace muster::launcher::diagnose {

std::string after(std::string_view line, std::string_view key, std::string_view ends) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return "";
  auto rest = line.substr(at + key.size());
  rest = rest.substr(0, rest.find_first_of(ends));
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '.')) rest.remove_suffix(1);
  return std::string(rest);
}

std::string last_group(std::string_view line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty() || line.back() != ')') return "";
  int depth = 0;
  for (std::size_t i = line.size(); i-- > 0;) {
    if (line[i] == ')') ++depth;
    if (line[i] == '(' && --depth == 0) {
      auto inside = line.substr(i + 1, line.size() - i - 2);
      while (!inside.empty() && inside.front() == ' ') inside.remove_prefix(1);
      while (!inside.empty() && inside.back() == ' ') inside.remove_suffix(1);
      return std::string(inside);
    }
  }
  return "";
}

std::string between(std::string_view line, std::string_view key,
                    std::initializer_list<std::string_view> ends) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return "";
  auto rest = line.substr(at + key.size());
  std::size_t cut = rest.size();
  for (auto end : ends) cut = std::min(cut, rest.find(end));
  rest = rest.substr(0, cut);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return std::string(rest);
}

std::optional<int> number_at(std::string_view s) {
  int value = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  if (r.ec != std::errc() || r.ptr == s.data()) return std::nullopt;
  return value;
}

}  // namespace muster::launcher::diagnose
