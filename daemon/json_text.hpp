// Writing musterd's replies as text directly (no JSON tree: a reply is built once per request,
// and building then serialising a tree was most of a request's cost). Strings are escaped as
// JSON requires; they are valid UTF-8 already (they come from parsed requests or our own text).
#pragma once

#include <string>
#include <string_view>

namespace muster::daemon {

// Appends `s` as a JSON string literal, quotes included.
inline void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

// Appends `"key":` then the string `value`.
inline void append_json_field(std::string& out, std::string_view key, std::string_view value) {
  append_json_string(out, key);
  out += ':';
  append_json_string(out, value);
}

}  // namespace muster::daemon
