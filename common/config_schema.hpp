// Config schemas: a config is a plain struct with in-class defaults, described by a table of
// fields (dotted TOML key, one-line doc, where the value lives). The loader (config_load.hpp)
// reads TOML files and `key=value` overrides through that table, so type checks, unknown-key
// errors, defaults printing and the example-file test all share one description.
//
// This file is not the job config itself (job_config.hpp), nor TOML parsing (config_load.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace muster::config {

// Where a field's value is stored. The alternatives are the value types a config may hold.
using value_ptr = std::variant<bool*, int*, std::int64_t*, double*, std::string*,
                               std::vector<std::string>*>;

// One key of a config of type Config. `bind` returns the address of the value inside a Config.
template <class Config>
struct field {
  std::string_view key;  // dotted TOML path, "launch.nproc"
  std::string_view doc;  // one line, shown in the example file and `muster config --defaults`
  value_ptr (*bind)(Config&);
};

// A field bound to one config object: what the loader works on.
struct bound_field {
  std::string_view key;
  std::string_view doc;
  value_ptr value;
};

// Where each key's value came from, "job.toml:14:9" or "command line 'launch.nproc=4'".
// Keys left at their default are absent.
using sources = std::map<std::string, std::string, std::less<>>;

template <class Config>
std::vector<bound_field> bind_fields(Config& config,
                                     std::span<const field<std::type_identity_t<Config>>> schema) {
  std::vector<bound_field> out;
  out.reserve(schema.size());
  for (const auto& f : schema) out.push_back({f.key, f.doc, f.bind(config)});
  return out;
}

// The name of a value's type as users read it: "an integer", "a string", ...
std::string_view type_name(const value_ptr& value);
// The value written as TOML: 4, true, 0.5, "text", ["a", "b"].
std::string format_value(const value_ptr& value);

}  // namespace muster::config

// MUSTER_CONFIG_FIELD(Config, member.path, "key", "doc"): one schema row.
#define MUSTER_CONFIG_FIELD(Config, member, key, doc) \
  ::muster::config::field<Config> {                   \
    key, doc, [](Config& c) -> ::muster::config::value_ptr { return &c.member; } \
  }
