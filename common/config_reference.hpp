// A config's reference as Markdown: one table per `[section]`, a row per key with its type, its
// default and its doc, from the same schema the loader reads (config_schema.hpp). docs/job-file.md
// holds `muster config --reference`, and a test keeps it equal to what the code prints.
#pragma once

#include <span>
#include <string>

#include "common/config_schema.hpp"

namespace muster::config {

// `fields` bound to a default-constructed config, so each value is the default.
std::string to_markdown_reference(std::span<const bound_field> fields);

}  // namespace muster::config
