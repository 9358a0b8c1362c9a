#include "common/config_reference.hpp"

#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "common/config_load.hpp"

namespace muster::config {

namespace {

// A table cell: '|' would end it early (also inside a code span), and outside one "<run_dir>"
// would be taken for an HTML tag.
std::string cell(std::string_view text, bool code) {
  std::string out;
  for (char c : text) {
    if (c == '|' || (c == '<' && !code)) out += '\\';
    out += c;
  }
  return out;
}

// "an integer" -> "integer": the table's column says what it is.
std::string_view short_type(std::string_view name) {
  for (std::string_view article : {"a ", "an "})
    if (name.starts_with(article)) name.remove_prefix(article.size());
  if (const auto paren = name.find(" ("); paren != std::string_view::npos)
    name = name.substr(0, paren);
  return name;
}

}  // namespace

std::string to_markdown_reference(std::span<const bound_field> fields) {
  std::string out;
  for (const auto section : sections_of(fields)) {
    out += fmt::format("{}### [{}]\n\n| key | type | default | meaning |\n|---|---|---|---|\n",
                       out.empty() ? "" : "\n", section);
    for (const auto& f : fields) {
      if (section_of(f.key) != section) continue;
      out += fmt::format("| `{}` | {} | `{}` | {} |\n", f.key, short_type(type_name(f.value)),
                         cell(format_value(f.value), true), cell(f.doc, false));
    }
  }
  return out;
}

}  // namespace muster::config
