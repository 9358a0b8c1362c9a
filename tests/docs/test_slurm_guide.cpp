// docs/slurm.md lists every key --muster-policy takes (the plugin's --help sends users there) and
// every [slurm] key of the job file with the sbatch option it becomes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>

extern "C" {
#include "muster_env.h"
}
#include "common/job_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

std::string guide() {
  return muster::test::read_file(std::filesystem::path(MUSTER_SOURCE_DIR) / "docs/slurm.md");
}

}  // namespace

TEST_CASE("the Slurm guide lists every key --muster-policy takes", "[docs]") {
  // the plugin's own list, from its error for an unknown key: "...; keys: tp, cp, ..."
  muster_policy policy{};
  char err[512] = {};
  REQUIRE(muster_policy_parse("no_such_key=1", &policy, err, sizeof err) != 0);
  const std::string message = err;
  const auto at = message.find("keys: ");
  REQUIRE(at != std::string::npos);
  std::istringstream keys(message.substr(at + 6));
  const auto page = guide();
  int listed = 0;
  for (std::string key; std::getline(keys, key, ',');) {
    key.erase(0, key.find_first_not_of(' '));
    INFO("--muster-policy key " << key);
    CHECK_THAT(page, Catch::Contains("| `" + key + "`") || Catch::Contains("| `" + key + "=N`") ||
                         Catch::Contains("| `" + key + "=MODE`"));
    ++listed;
  }
  CHECK(listed >= 11);
}

TEST_CASE("the Slurm guide maps every [slurm] key of the job file", "[docs]") {
  const auto page = guide();
  int keys = 0;
  for (const auto& field : muster::job_config_schema()) {
    const std::string key(field.key);
    if (!key.starts_with("slurm.")) continue;
    ++keys;
    INFO(key);
    CHECK_THAT(page, Catch::Contains("| `" + key + "` |"));
  }
  CHECK(keys >= 7);
}
