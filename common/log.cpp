// Logging setup: see log.hpp.
#include "common/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>

#include "common/env_knobs.hpp"
#include "common/error.hpp"

namespace muster {

namespace log {
namespace {

constexpr std::string_view kLevelNames = "trace, debug, info, warn, error, critical, off";

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

spdlog::sink_ptr stderr_sink() {
  static auto sink = [] {
    auto s = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    s->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
    return s;
  }();
  return sink;
}

}  // namespace

bool parse_level(std::string_view name, spdlog::level::level_enum& level) {
  if (name == "warn") name = "warning";  // spdlog 1.10 names the level "warning"
  for (int i = spdlog::level::trace; i < spdlog::level::n_levels; ++i) {
    auto candidate = static_cast<spdlog::level::level_enum>(i);
    auto candidate_name = spdlog::level::to_string_view(candidate);
    if (std::string_view(candidate_name.data(), candidate_name.size()) == name) {
      level = candidate;
      return true;
    }
  }
  return false;
}

spdlog::level::level_enum check_level(std::string_view name, errc category, std::string_view where) {
  spdlog::level::level_enum level{};
  MUSTER_CHECK(parse_level(name, level), category, "{}: unknown level \"{}\"; use one of {}", where,
               name, kLevelNames);
  return level;
}

void setup(std::string_view config_level) {
  auto level = check_level(config_level, errc::config, "log.level");
  if (auto env = env_value(kEnvLogLevel)) {
    level = check_level(*env, errc::environment, fmt::format("{}={}", kEnvLogLevel, *env));
  }
  std::lock_guard lock(registry_mutex());
  spdlog::set_level(level);  // every registered logger, and the default for new ones
}

std::shared_ptr<spdlog::logger> get(std::string_view name) {
  std::lock_guard lock(registry_mutex());
  std::string key(name);
  if (auto existing = spdlog::get(key)) return existing;
  auto logger = std::make_shared<spdlog::logger>(key, stderr_sink());
  spdlog::initialize_logger(logger);  // registers it and applies the global level
  return logger;
}

}  // namespace log
}  // namespace muster
