// musterd's configuration through the real binary: --check-config refuses every file the start
// refuses, with the same line, and warns of what the start warns of.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/musterd_harness.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::string kMusterd = muster::test::musterd_program();

// `musterd --config <dir>/musterd.toml` holding `config`, with `more` arguments; the start
// gets a socket and a state directory in `dir`.
muster::test::process_result musterd(const muster::test::temp_dir& dir, const std::string& config,
                                     const std::vector<std::string>& more) {
  muster::test::write_file(dir / "musterd.toml", config);
  std::vector<std::string> argv = {kMusterd,
                                   "--config",
                                   (dir / "musterd.toml").string(),
                                   "--socket",
                                   (dir / "run/musterd.sock").string(),
                                   "--state-dir",
                                   (dir / "state").string()};
  argv.insert(argv.end(), more.begin(), more.end());
  return muster::test::run_process(argv);
}

}  // namespace

TEST_CASE(
    "musterd --check-config refuses a gpu_description the start cannot read, as the start does",
    "[musterd]") {
  muster::test::temp_dir dir("musterd");
  const std::string config = "[node]\ngpu_description = \"/nonexist.json\"\n";
  const auto check = musterd(dir, config, {"--check-config"});
  CHECK(check.exit_code == 2);
  CHECK_THAT(check.err, Catch::Contains("musterd.toml:2:") &&
                            Catch::Contains("node.gpu_description: cannot read /nonexist.json"));
  const auto start = musterd(dir, config, {});  // fails before it binds the socket
  CHECK(start.exit_code == 2);
  CHECK(start.err == check.err);

  muster::test::write_file(dir / "gpus.json", "[1, 2]");  // JSON, but not the description
  const auto not_object =
      musterd(dir, "[node]\ngpu_description = \"" + (dir / "gpus.json").string() + "\"\n",
              {"--check-config"});
  CHECK(not_object.exit_code == 2);
  CHECK_THAT(not_object.err, Catch::Contains("musterd.toml:2:") &&
                                 Catch::Contains("node.gpu_description: ") &&
                                 Catch::Contains("gpus.json: not a JSON object"));
}

TEST_CASE("a missing musterd config is named as musterd's, with its usual path", "[musterd]") {
  muster::test::temp_dir dir("musterd");
  const auto file = (dir / "nonexist.toml").string();
  const auto missing = muster::test::run_process({kMusterd, "--config", file, "--check-config"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err,
             Catch::StartsWith("musterd: musterd's config file " + file + ": no such file") &&
                 Catch::Contains("/etc/muster/musterd.toml") && !Catch::Contains("job file"));
}

TEST_CASE("an interface the host lacks is warned of by --check-config and by the start",
          "[musterd]") {
  if (!std::filesystem::is_directory("/sys/class/net")) {
    WARN("SKIPPED: no /sys/class/net to compare with");
    return;
  }
  const std::string config = "[node]\ninterfaces = [\"muster-none0\"]\n";
  muster::test::temp_dir dir("musterd");
  const auto check = musterd(dir, config, {"--check-config"});
  CHECK(check.exit_code == 0);  // a warning: it may be plugged in later
  CHECK_THAT(check.err, Catch::Contains("musterd: warning: ") &&
                            Catch::Contains("musterd.toml:2:14: node.interfaces: this host has no "
                                            "muster-none0 (it has "));
  muster::test::running_daemon d({}, config);
  CHECK_THAT(d.log(), Catch::Contains("node.interfaces: this host has no muster-none0"));
}
