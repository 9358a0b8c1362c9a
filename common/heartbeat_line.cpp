// The heartbeat progress line: see heartbeat_line.hpp.
#include "common/heartbeat_line.hpp"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

namespace muster {
namespace {

template <class T>
std::optional<T> number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A step count: a whole number, not negative.
std::optional<std::int64_t> count(std::string_view text) {
  auto n = number<std::int64_t>(text);
  return n && *n >= 0 ? n : std::nullopt;
}

}  // namespace

heartbeat_progress parse_heartbeat(std::string_view text) {
  heartbeat_progress p;
  const auto newline = text.find('\n');
  if (newline == std::string_view::npos) return p;  // nothing, or a write caught half done
  std::istringstream words{std::string(text.substr(0, newline))};
  for (std::string word; words >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string_view key(word.data(), eq), value(word.data() + eq + 1, word.size() - eq - 1);
    if (key == "step") p.step = count(value);
    else if (key == "steps") p.steps = count(value);
    else if (key == "loss") p.loss = number<double>(value);
    else if (key == "tokens_per_s") p.tokens_per_s = number<double>(value);
  }
  return p;
}

std::string format_heartbeat(const heartbeat_progress& p) {
  std::string line;
  auto add = [&line](const std::string& word) { line += (line.empty() ? "" : " ") + word; };
  if (p.step) add(fmt::format("step={}", *p.step));
  if (p.steps) add(fmt::format("steps={}", *p.steps));
  if (p.loss) add(fmt::format("loss={}", *p.loss));
  if (p.tokens_per_s) add(fmt::format("tokens_per_s={}", *p.tokens_per_s));
  return line + '\n';
}

}  // namespace muster
