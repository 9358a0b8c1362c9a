// Picking fields out of one log line for the line classifier (log_signal.cpp): the text after a
// key up to a delimiter, and a number at the start of a text. Pure string work, no allocation
// beyond the returned string.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace muster::launcher::diagnose {

// The text after `key` up to the first of the characters `ends` (or the line's end), trimmed of
// spaces and a trailing '.'; "" when `key` is not in `line`.
std::string after(std::string_view line, std::string_view key, std::string_view ends);

// The text after `key` up to the earliest of the strings `ends` (or the line's end), trimmed of
// spaces; "" when `key` is not in `line`.
std::string between(std::string_view line, std::string_view key,
                    std::initializer_list<std::string_view> ends);

// The text inside the parentheses that close `line` (nested ones kept), trimmed of spaces;
// "" when the line does not end in a balanced group: "... (at seq 4) (Connection reset)" gives
// "Connection reset".
std::string last_group(std::string_view line);

// The (possibly negative) integer at the start of `s`.
std::optional<int> number_at(std::string_view s);

// Whether `line` holds `word`.
inline bool has(std::string_view line, std::string_view word) {
  return line.find(word) != std::string_view::npos;
}

}  // namespace muster::launcher::diagnose
