// Tests of musterd's configuration (daemon/daemon_config.hpp): every bad value is refused at its
// file:line with the key and the fix.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "daemon/daemon_config.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/temp_dir.hpp"

using muster::daemon::daemon_config;
using muster::daemon::load_daemon_config;

namespace {

// The error that loading `text` as <dir>/musterd.toml throws.
std::string error_of(const std::string& text) {
  muster::test::temp_dir dir("daemon-config");
  muster::test::write_file(dir / "musterd.toml", text);
  INFO(text);
  return muster::test::expect_error(muster::errc::config,
                                    [&] { load_daemon_config(dir / "musterd.toml", true); });
}

}  // namespace

TEST_CASE(
    "a daemon.mode that is not octal is refused at its line, and an unquoted one is told to quote",
    "[daemon_config]") {
  CHECK_THAT(error_of("[daemon]\nmode = \"0999\"\n"),
             Catch::Contains("musterd.toml:2:8: daemon.mode: \"0999\" is not an octal file mode; "
                             "use \"0660\""));
  // TOML refuses 0660 for its leading zero: the message names the key and how to write it
  CHECK_THAT(error_of("[daemon]\nsocket = \"/run/x.sock\"\nmode = 0660\n"),
             Catch::Contains("musterd.toml:3:") && Catch::Contains("leading zero") &&
                 Catch::EndsWith("daemon.mode is a string: quote it, mode = \"0660\""));
  CHECK_THAT(error_of("[daemon]\nkeep_days = 090\n"),
             Catch::EndsWith("daemon.keep_days: write it without the leading zeros, "
                             "keep_days = 90"));
  // from the command line (musterd --mode): named as such
  muster::test::temp_dir dir("daemon-config");
  const auto given = muster::test::expect_error(muster::errc::config, [&] {
    load_daemon_config(dir / "none.toml", false, [](daemon_config& c, auto& where) {
      c.daemon.mode = "rw";
      where["daemon.mode"] = "command line --mode";
    });
  });
  CHECK_THAT(given, Catch::StartsWith("command line --mode: daemon.mode: \"rw\""));
}

TEST_CASE("node.compute_major is a compute capability major: 90 for 9 is refused with the range",
          "[daemon_config]") {
  CHECK_THAT(error_of("[node]\ncompute_major = 90\n"),
             Catch::Contains("musterd.toml:2:17: node.compute_major: 90 is no compute capability "
                             "major; use 0 to probe, or 1 to 15"));
  CHECK_THAT(error_of("[node]\ncompute_major = -1\n"), Catch::Contains("use 0 to probe"));
  muster::test::temp_dir dir("daemon-config");
  for (const int major : {0, 9, 12}) {
    muster::test::write_file(dir / "musterd.toml",
                             "[node]\ncompute_major = " + std::to_string(major) + "\n");
    CHECK(load_daemon_config(dir / "musterd.toml", true).node.compute_major == major);
  }
}

TEST_CASE("an interface the host lacks is a warning naming the key and the host's interfaces",
          "[daemon_config]") {
  std::vector<std::string> host;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/net", ec))
    host.push_back(e.path().filename().string());
  if (ec || host.empty()) {
    WARN("SKIPPED: no /sys/class/net to compare with");
    return;
  }
  muster::test::temp_dir dir("daemon-config");
  muster::test::write_file(dir / "musterd.toml", "[node]\ninterfaces = [\"muster-none0\"]\n");
  std::vector<std::string> warnings;
  const auto c = load_daemon_config(dir / "musterd.toml", true, {}, &warnings);
  CHECK(c.node.interfaces == std::vector<std::string>{"muster-none0"});  // loaded all the same
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("musterd.toml:2:14: node.interfaces: this host has no "
                                          "muster-none0 (it has ") &&
                              Catch::Contains(host.front()));
  // one the host has: no warning
  muster::test::write_file(dir / "musterd.toml",
                           "[node]\ninterfaces = [\"" + host.front() + "\"]\n");
  warnings.clear();
  load_daemon_config(dir / "musterd.toml", true, {}, &warnings);
  CHECK(warnings.empty());
}
