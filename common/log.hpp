// Logging setup: named spdlog loggers that all write to stderr (journald picks that up for the
// daemon), with one level for all of them.
//
// Names are per subsystem, "launcher", "daemon", "engine.comm"; workers add their rank
// ("engine[rank 3]"). warn = actionable, info = lifecycle, debug = per collective.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "common/error.hpp"

namespace muster::log {

// Sets the level of every muster logger from `config_level` (log.level in the config), then from
// MUSTER_LOG_LEVEL when that is set (the environment wins). Throws errc::config or
// errc::environment naming the bad value and the accepted names. Safe to call again.
void setup(std::string_view config_level = "info");

// The logger with this name, created on first use with the shared stderr sink and current level.
std::shared_ptr<spdlog::logger> get(std::string_view name);

// "debug" -> spdlog::level::debug; "warn" and "warning" both name the warning level.
// Returns false for unknown names.
bool parse_level(std::string_view name, spdlog::level::level_enum& level);

// The level `name` names; otherwise throws muster::error(category) with the message
// "<where>: unknown level \"<name>\"; use one of trace, debug, ...". `where` names the source,
// e.g. "job.toml:3:9: log.level" or "MUSTER_LOG_LEVEL=LOUD".
spdlog::level::level_enum check_level(std::string_view name, errc category, std::string_view where);

}  // namespace muster::log
