// Tests of logging setup (common/log.hpp): the level comes from the config, then the environment.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "common/env_knobs.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "tests/support/expect_error.hpp"

namespace {

struct scoped_env {
  explicit scoped_env(const char* value) {
    if (value) setenv(std::string(muster::kEnvLogLevel).c_str(), value, 1);
    else unsetenv(std::string(muster::kEnvLogLevel).c_str());
  }
  ~scoped_env() { unsetenv(std::string(muster::kEnvLogLevel).c_str()); }
};

}  // namespace

TEST_CASE("log level comes from the config when MUSTER_LOG_LEVEL is unset", "[log]") {
  scoped_env env(nullptr);
  auto logger = muster::log::get("launcher");
  muster::log::setup("debug");
  CHECK(logger->level() == spdlog::level::debug);
  CHECK(muster::log::get("daemon")->level() == spdlog::level::debug);  // created after setup
  muster::log::setup("warning");
  CHECK(logger->level() == spdlog::level::warn);
  CHECK(muster::log::get("launcher") == logger);
}

TEST_CASE("MUSTER_LOG_LEVEL wins over the config", "[log]") {
  scoped_env env("error");
  muster::log::setup("trace");
  CHECK(muster::log::get("engine.comm")->level() == spdlog::level::err);
}

TEST_CASE("log setup names the bad level and where it came from", "[log]") {
  {
    scoped_env env(nullptr);
    CHECK_THAT(muster::test::expect_error(muster::errc::config, [] { muster::log::setup("chatty"); }),
               Catch::Contains("log.level: unknown level \"chatty\""));
  }
  scoped_env env("LOUD");
  CHECK_THAT(muster::test::expect_error(muster::errc::environment, [] { muster::log::setup("info"); }),
             Catch::StartsWith("MUSTER_LOG_LEVEL=LOUD: unknown level"));
}
