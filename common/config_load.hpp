// Loading a config: a TOML file, then `key=value` overrides, into bound fields (config_schema.hpp).
//
// Every mistake a user can make is a muster::error (errc::config) that names the place
// (`job.toml:14:9` or `command line 'launch.nproc=x'`), the key, what was expected and what was
// found, and proposes the fix (the nearest known key, the default value). Nothing here validates
// ranges or relations between values: that is each config's validate().
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_schema.hpp"

namespace muster::config {

// What a config file is, for the messages when it is missing or unreadable: "<name> <file>: no
// such file; give the path of <what>, <example>". The defaults are the job file's.
// A name another tool gives a key (Megatron's --tensor-model-parallel-size for
// parallel.tensor): written as a key, the error names muster's. `name` is matched with its
// dashes as underscores and without leading ones.
struct other_name {
  std::string_view name;
  std::string_view key;   // muster's key, or what to write ("parallel.sharding = \"optim\"")
  std::string_view tool;  // "Megatron", "torchrun"
};

struct file_kind {
  std::string_view name = "config file";
  std::string_view what = "a TOML job file";
  std::string_view example = "e.g. etc/examples/job.toml";
  std::span<const other_name> other_names = {};
};

// Parses the TOML file and assigns every key it holds to the matching field; records the
// position of each in `where`. Keys absent from the file keep their current (default) values.
// Throws errc::config on unreadable files (naming `kind`), TOML syntax errors, unknown keys and
// wrong types.
void load_file(const std::filesystem::path& file, std::span<const bound_field> fields,
               sources& where, const file_kind& kind = {});

// As load_file, for TOML text; `source_name` stands for the file name in messages.
void load_text(std::string_view text, std::string_view source_name,
               std::span<const bound_field> fields, sources& where,
               std::span<const other_name> other_names = {});

// Applies one dotted override `section.key=value`. The value is read as a TOML value
// (`4`, `true`, `"text"`, `["a", "b"]`); for string fields bare text is taken as it is.
// Throws errc::config on a missing '=', an unknown key or a wrong type.
void apply_override(std::string_view assignment, std::span<const bound_field> fields,
                    sources& where, std::span<const other_name> other_names = {});

// The section of a dotted key ("train.steps" -> "train"; "" for a key without one), and the
// sections of `fields` in the order they first appear.
std::string_view section_of(std::string_view key);
std::vector<std::string_view> sections_of(std::span<const bound_field> fields);

// The config as TOML, one `[section]` per key prefix in schema order, each key preceded by
// its doc as a comment when `with_docs`, and followed by where its value came from as a comment
// when `origins` is given ("# job.toml:4:1", "# command line 'train.steps=5'", "# default").
// load_text(to_toml(x)) gives x back.
std::string to_toml(std::span<const bound_field> fields, bool with_docs,
                    const sources* origins = nullptr);

// What `muster config --get` prints of `key`: its value on one line (a string as its bare text,
// for scripts; other values as TOML), or for a section's name its keys as `key = value` lines;
// with `origins`, where each came from after it as a comment. Throws errc::config for a name
// that is neither, with the nearest known.
std::string value_text(std::span<const bound_field> fields, std::string_view key,
                       const sources* origins = nullptr,
                       std::span<const other_name> other_names = {});

// The place a key's value came from for validate() messages: its entry in `where`, or
// "not set (its default)" when the key was not set.
std::string place_of(const sources& where, std::string_view key);

}  // namespace muster::config
