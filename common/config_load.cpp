// TOML file and override loading over a field table: see config_load.hpp.
#include "common/config_load.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace muster::config {
namespace {

std::string position(std::string_view source, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

const bound_field* find_field(std::span<const bound_field> fields, std::string_view key) {
  for (const auto& f : fields) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

bool is_section(std::span<const bound_field> fields, std::string_view path) {
  return std::any_of(fields.begin(), fields.end(), [&](const bound_field& f) {
    return f.key.size() > path.size() && f.key.starts_with(path) && f.key[path.size()] == '.';
  });
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Whether `a` is a near miss of `b`: within 2 edits, or a quarter of its length, and fewer
// than its length (so "zz" is no miss of "a").
bool near(std::string_view a, std::string_view b) {
  const auto d = edit_distance(a, b);
  return d <= std::max<size_t>(2, a.size() / 4) && d < a.size();
}

// "; did you mean 'launch.nproc'?" for a near miss (for a `table`, a [section] header, the
// section it misspells first: "[trian]": [train]); for a name with no section, the keys it names
// in any section ("nproc": launch.nproc) or the section it misspells; else the keys known in
// that section, or the sections.
std::string suggest(std::span<const bound_field> fields, std::string_view key, bool table,
                    std::span<const other_name> other_names) {
  // the name alone, as another tool writes it: "tensor-model-parallel-size", "--num-experts"
  const auto normal = [](std::string_view name) {
    while (name.starts_with('-')) name.remove_prefix(1);
    std::string out(name.substr(name.rfind('.') + 1));
    std::replace(out.begin(), out.end(), '-', '_');
    return out;
  };
  const auto leaf = normal(key);
  for (const auto& other : other_names)
    if (normal(other.name) == leaf)
      return fmt::format(
          "; {}'s --{} is {} in muster", other.tool,
          [&] {
            auto dashed = normal(other.name);
            std::replace(dashed.begin(), dashed.end(), '_', '-');
            return dashed;
          }(),
          other.key.find(' ') == std::string_view::npos ? fmt::format("'{}'", other.key)
                                                        : std::string(other.key));
  if (!table && key.find('.') != std::string_view::npos)  // a key of another section
    for (const auto& f : fields)
      if (normal(f.key) == leaf && section_of(f.key) != section_of(key))
        return fmt::format("; did you mean '{}'? (in [{}])", f.key, section_of(f.key));
  if (table)  // a [section] header: the sections first ("[dat]": [data], not checkpoint.dir)
    for (const auto section : sections_of(fields))
      if (near(key, section)) return fmt::format("; did you mean [{}]?", section);
  // a key of its section cut short or run on: "micro_batch" for micro_batch_size,
  // "expert_parallel" for expert
  if (!table) {
    const auto dot = key.rfind('.');
    const std::string section =
        dot == std::string_view::npos ? "" : std::string(key.substr(0, dot));
    const bound_field* stem = nullptr;
    int stems = 0;
    for (const auto& f : fields) {
      if (section_of(f.key) != section) continue;
      const auto known = normal(f.key);
      if (known.starts_with(leaf + "_") || leaf.starts_with(known + "_")) stem = &f, ++stems;
    }
    if (stems == 1) return fmt::format("; did you mean '{}'?", stem->key);
  }
  const bound_field* best = nullptr;
  size_t best_distance = SIZE_MAX;
  for (const auto& f : fields) {
    size_t d = edit_distance(key, f.key);
    if (d < best_distance) best_distance = d, best = &f;
  }
  if (best && near(key, best->key)) return fmt::format("; did you mean '{}'?", best->key);
  auto dot = key.rfind('.');
  if (dot == std::string_view::npos) {
    std::vector<std::string> named;  // keys whose last component it is, or nearly
    for (const auto& f : fields)
      if (near(key, std::string_view(f.key).substr(f.key.rfind('.') + 1)))
        named.push_back(fmt::format("'{}'", f.key));
    if (!named.empty() && named.size() <= 3)
      return fmt::format("; did you mean {}?", fmt::join(named, " or "));
    const auto sections = sections_of(fields);
    for (const auto section : sections)
      if (near(key, section)) return fmt::format("; did you mean [{}]?", section);
    return fmt::format(
        "; known sections: {} (a key is written inside its section, or as "
        "section.key on the command line)",
        fmt::join(sections, ", "));
  }
  std::string section(key.substr(0, dot));
  std::vector<std::string_view> known;
  for (const auto& f : fields) {
    if (f.key.starts_with(section + ".")) known.push_back(f.key);
  }
  if (known.empty())
    return fmt::format("; known sections: {}", fmt::join(sections_of(fields), ", "));
  return fmt::format("; known keys: {}", fmt::join(known, ", "));
}

std::string describe(const toml::node& node) {
  if (auto s = node.as_string()) return fmt::format("the string \"{}\"", s->get());
  if (auto i = node.as_integer()) return fmt::format("the integer {}", i->get());
  if (auto d = node.as_floating_point()) return fmt::format("the number {}", d->get());
  if (auto b = node.as_boolean()) return fmt::format("the boolean {}", b->get());
  if (node.is_array()) return "an array";
  if (node.is_table()) return "a table";
  return "a date or time";
}

// Stores node into value when the types match; otherwise returns why not (empty on success).
std::string assign(const value_ptr& value, const toml::node& node) {
  return std::visit(
      [&](auto* target) -> std::string {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (auto b = node.as_boolean()) return *target = b->get(), "";
        } else if constexpr (std::is_same_v<T, int>) {
          if (auto i = node.as_integer()) {
            if (i->get() < INT_MIN || i->get() > INT_MAX) return "is out of range for this key";
            return *target = static_cast<int>(i->get()), "";
          }
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          if (auto i = node.as_integer()) return *target = i->get(), "";
        } else if constexpr (std::is_same_v<T, double>) {
          if (auto d = node.as_floating_point()) return *target = d->get(), "";
          if (auto i = node.as_integer()) return *target = static_cast<double>(i->get()), "";
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (auto s = node.as_string()) return *target = s->get(), "";
        } else {
          // toml++ calls an empty array inhomogeneous; it is a valid empty list of strings.
          if (auto a = node.as_array(); a && (a->empty() || a->is_homogeneous<std::string>())) {
            target->clear();
            for (const auto& item : *a) target->push_back(item.as_string()->get());
            return "";
          }
        }
        return "has the wrong type";
      },
      value);
}

void assign_or_throw(const bound_field& f, const toml::node& node, const std::string& place) {
  std::string example = fmt::format("{} = {}", f.key, format_value(f.value));
  std::string why = assign(f.value, node);
  if (why.empty()) return;
  MUSTER_THROW(errc::config, "{}: {}: expected {}, got {} which {}; write it like `{}`", place,
               f.key, type_name(f.value), describe(node), why, example);
}

// A key that is wrong where it stands (unknown, or a value of the wrong type), and where.
struct key_error {
  toml::source_position at;
  std::string message;
};

// Every key of `table` into `fields`; what is wrong into `errors`, all of it.
void walk(const toml::table& table, const std::string& prefix, std::string_view source,
          std::span<const bound_field> fields, sources& where, std::vector<key_error>& errors,
          std::span<const other_name> other_names) {
  for (const auto& [name, node] : table) {
    std::string path = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const bound_field* f = find_field(fields, path)) {
      std::string place = position(source, node.source());
      try {
        assign_or_throw(*f, node, place);
        where[path] = place;
      } catch (const error& e) {
        errors.push_back({node.source().begin, e.what()});
      }
    } else if (node.is_table() && is_section(fields, path)) {
      walk(*node.as_table(), path, source, fields, where, errors, other_names);
    } else {
      errors.push_back({name.source().begin,
                        fmt::format("{}: unknown {} '{}'{}", position(source, name.source()),
                                    node.is_table() ? "section" : "key", path,
                                    suggest(fields, path, node.is_table(), other_names))});
    }
  }
}

// All of `errors` as one, in the order of the file.
void throw_key_errors(std::vector<key_error> errors) {
  if (errors.empty()) return;
  std::stable_sort(errors.begin(), errors.end(), [](const key_error& a, const key_error& b) {
    return std::pair(a.at.line, a.at.column) < std::pair(b.at.line, b.at.column);
  });
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.message);
  if (lines.size() == 1) MUSTER_THROW(errc::config, "{}", lines.front());
  MUSTER_THROW(errc::config, "{} keys are wrong:\n  {}", lines.size(), fmt::join(lines, "\n  "));
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += c;
    }
  }
  return out + "\"";
}

// For a value TOML refuses for its leading zeros (`mode = 0660`): the key it was given for and
// how to write it, quoted for a string key (a file mode), without the zeros for a number; "" for
// other errors, or a line that does not read as `key = value`.
std::string leading_zero_hint(std::string_view text, std::size_t line_no,
                              std::string_view description, std::span<const bound_field> fields) {
  if (description.find("leading zero") == std::string_view::npos) return "";
  std::string section, name, value;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (std::size_t n = 1; std::getline(lines, line) && n <= line_no; ++n) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    if (line[first] == '[') {
      const auto end = line.find(']', first);
      if (end != std::string::npos) section = line.substr(first + 1, end - first - 1);
    } else if (const auto eq = line.find('=');
               n == line_no && eq != std::string::npos && eq > first) {
      name = line.substr(first, line.find_last_not_of(" \t", eq - 1) + 1 - first);
      const auto start = line.find_first_not_of(" \t", eq + 1);
      if (start != std::string::npos)
        value = line.substr(start, line.find_first_of(" \t\r#,]", start) - start);
    }
  }
  if (name.empty() || value.empty()) return "";
  const std::string key = section.empty() ? name : section + "." + name;
  const auto digits = value.find_first_not_of("0");
  const std::string number = digits == std::string::npos ? "0" : value.substr(digits);
  const bound_field* f = find_field(fields, key);
  if (f && std::holds_alternative<std::string*>(f->value))
    return fmt::format("; {} is a string: quote it, {} = \"{}\"", key, name, value);
  if (f) return fmt::format("; {}: write it without the leading zeros, {} = {}", key, name, number);
  return fmt::format("; {}: quote it if it is text (\"{}\"), or write {} for a number", key, value,
                     number);
}

}  // namespace

std::string_view type_name(const value_ptr& value) {
  static constexpr std::string_view kNames[] = {"a boolean (true or false)", "an integer",
                                                "an integer", "a number", "a string",
                                                "an array of strings"};
  return kNames[value.index()];
}

std::string format_value(const value_ptr& value) {
  return std::visit(
      [](auto* v) -> std::string {
        using T = std::remove_pointer_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return *v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          std::string s = fmt::format("{}", *v);
          if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // keep it a TOML float
          return s;
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote(*v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::vector<std::string> items;
          for (const auto& item : *v) items.push_back(quote(item));
          return fmt::format("[{}]", fmt::join(items, ", "));
        } else {
          return fmt::format("{}", *v);
        }
      },
      value);
}

// A string left open on line `line_no` (an odd count of unescaped double quotes before any
// comment): toml++ then speaks of control characters or the end of the line.
std::string open_quote_hint(std::string_view text, std::size_t line_no) {
  std::size_t n = 1, at = 0;
  for (; n < line_no && at != std::string_view::npos; ++n) {
    at = text.find('\n', at);
    if (at != std::string_view::npos) ++at;
  }
  if (at == std::string_view::npos) return "";
  const auto line = text.substr(at, text.find('\n', at) - at);
  // literal ('...') and multi-line strings count quotes otherwise: no hint there
  if (line.find('\'') != std::string_view::npos || line.find("\"\"\"") != std::string_view::npos)
    return "";
  int quotes = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\')
      ++i;  // an escaped character
    else if (line[i] == '"')
      ++quotes;
    else if (line[i] == '#' && quotes % 2 == 0)
      break;
  }
  return quotes % 2 == 1 ? "; a string on this line is not closed: end it with \" on the same "
                           "line"
                         : "";
}

void load_text(std::string_view text, std::string_view source_name,
               std::span<const bound_field> fields, sources& where,
               std::span<const other_name> other_names) {
  toml::table table;
  try {
    table = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    // a Hugging Face config.json given where the job file goes
    const auto first = text.find_first_not_of(" \t\r\n");
    const bool json =
        source_name.ends_with(".json") || (first != std::string_view::npos && text[first] == '{');
    MUSTER_THROW(
        errc::config, "{}: invalid TOML: {}{}", position(source_name, e.source()), e.description(),
        json ? "; this is JSON, not a job file: a Hugging Face config.json is given as "
               "model.config_json=FILE after a job file (etc/examples/job.toml lists "
               "every key)"
             : [&] {
                 auto hint =
                     leading_zero_hint(text, e.source().begin.line, e.description(), fields);
                 return hint.empty() ? open_quote_hint(text, e.source().begin.line) : hint;
               }());
  }
  std::vector<key_error> errors;
  walk(table, "", source_name, fields, where, errors, other_names);
  throw_key_errors(std::move(errors));
}

void load_file(const std::filesystem::path& file, std::span<const bound_field> fields,
               sources& where, const file_kind& kind) {
  std::error_code ec;
  auto status = std::filesystem::status(file, ec);
  MUSTER_CHECK(std::filesystem::exists(status), errc::config,
               "{} {}: no such file; give the path of {}, {}", kind.name, file.string(), kind.what,
               kind.example);
  MUSTER_CHECK(std::filesystem::is_regular_file(status), errc::config,
               "{} {}: not a regular file (a directory?); give the path of {}", kind.name,
               file.string(), kind.what);
  std::ifstream in(file, std::ios::binary);
  int open_errno = errno;
  MUSTER_CHECK(in.is_open(), errc::config, "{} {}: cannot be opened: {}; check its permissions",
               kind.name, file.string(), std::strerror(open_errno));
  std::ostringstream text;
  text << in.rdbuf();
  MUSTER_CHECK(!in.bad(), errc::config, "{} {}: read failed: {}", kind.name, file.string(),
               std::strerror(errno));
  load_text(text.str(), file.string(), fields, where, kind.other_names);
}

void apply_override(std::string_view assignment, std::span<const bound_field> fields,
                    sources& where, std::span<const other_name> other_names) {
  std::string place = fmt::format("command line '{}'", assignment);
  auto eq = assignment.find('=');
  MUSTER_CHECK(eq != std::string_view::npos && eq > 0, errc::config,
               "{}: an override is written section.key=value, e.g. launch.nproc=4", place);
  std::string key(assignment.substr(0, eq));
  std::string_view text = assignment.substr(eq + 1);
  const bound_field* f = find_field(fields, key);
  MUSTER_CHECK(f, errc::config, "{}: unknown key '{}'{}", place, key,
               suggest(fields, key, false, other_names));

  toml::table parsed;
  const toml::node* node = nullptr;
  try {
    parsed = toml::parse(fmt::format("v = {}", text));
    if (parsed.size() == 1) node = parsed.get("v");
  } catch (const toml::parse_error&) {
  }
  if (auto* s = std::get_if<std::string*>(&f->value); s && !(node && node->is_string())) {
    **s = std::string(text);  // bare text is a string: job.name=pretrain
  } else if (node) {
    assign_or_throw(*f, *node, place);
  } else {
    MUSTER_THROW(errc::config, "{}: {}: expected {}, got '{}'; write it like {}={}", place, key,
                 type_name(f->value), text, key, format_value(f->value));
  }
  where[key] = place;
}

std::string_view section_of(std::string_view key) {
  const auto dot = key.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : key.substr(0, dot);
}

std::vector<std::string_view> sections_of(std::span<const bound_field> fields) {
  std::vector<std::string_view> sections;
  for (const auto& f : fields)
    if (const auto s = section_of(f.key);
        std::find(sections.begin(), sections.end(), s) == sections.end())
      sections.push_back(s);
  return sections;
}

namespace {

// "  # job.toml:4:1" after a key's line, from `origins` (none without them)
std::string origin_comment(const sources* origins, std::string_view key) {
  if (!origins) return "";
  const auto it = origins->find(key);
  return fmt::format("  # {}", it == origins->end() ? "default" : it->second);
}

}  // namespace

std::string to_toml(std::span<const bound_field> fields, bool with_docs, const sources* origins) {
  auto sections = sections_of(fields);
  std::stable_partition(sections.begin(), sections.end(), [](auto s) { return s.empty(); });
  std::string out;
  for (auto section : sections) {
    if (!section.empty()) out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", section);
    for (const auto& f : fields) {
      if (section_of(f.key) != section) continue;
      if (with_docs) out += fmt::format("# {}\n", f.doc);
      out += fmt::format("{} = {}{}\n", f.key.substr(section.empty() ? 0 : section.size() + 1),
                         format_value(f.value), origin_comment(origins, f.key));
    }
  }
  return out;
}

std::string value_text(std::span<const bound_field> fields, std::string_view key,
                       const sources* origins, std::span<const other_name> other_names) {
  if (const bound_field* f = find_field(fields, key)) {
    const auto* text = std::get_if<std::string*>(&f->value);
    return fmt::format("{}{}\n", text ? **text : format_value(f->value),
                       origin_comment(origins, f->key));
  }
  std::string out;
  for (const auto& f : fields)
    if (!key.empty() && section_of(f.key) == key)
      out += fmt::format("{} = {}{}\n", f.key.substr(key.size() + 1), format_value(f.value),
                         origin_comment(origins, f.key));
  MUSTER_CHECK(!out.empty(), errc::config, "config --get: unknown key '{}'{}", key,
               suggest(fields, key, false, other_names));
  return out;
}

std::string place_of(const sources& where, std::string_view key) {
  auto it = where.find(key);
  return it == where.end() ? "not set (its default)" : it->second;
}

}  // namespace muster::config
