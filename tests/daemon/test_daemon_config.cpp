// Tests of musterd's configuration (daemon/daemon_config.hpp): every bad value is refused at its
// file:line with the key and the fix.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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
  std::erase_if(warnings, [](const std::string& w) {  // the host's other lacks (a group)
    return w.find("node.interfaces") == std::string::npos;
  });
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("musterd.toml:2:14: node.interfaces: this host has no "
                                          "muster-none0 (it has ") &&
                              Catch::Contains(host.front()));
  // one the host has: no warning
  muster::test::write_file(dir / "musterd.toml",
                           "[node]\ninterfaces = [\"" + host.front() + "\"]\n");
  warnings.clear();
  load_daemon_config(dir / "musterd.toml", true, {}, &warnings);
  CHECK(std::none_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("node.interfaces") != std::string::npos;
  }));
}

TEST_CASE(
    "what turns a check off unseen is a warning: an HCA, squeue, kernel log, shm folder or group "
    "the host lacks",
    "[daemon_config]") {
  muster::test::temp_dir dir("daemon-config");
  muster::test::write_file(
      dir / "musterd.toml",
      "[daemon]\ngroup = \"muster-no-group\"\n[node]\nib_hcas = "
      "[\"muster_hca9\"]\n[health]\nkernel_log = \"/nonexistent/kmsg\"\n"
      "shm_dir = \"/nonexistent/shm\"\n[slurm]\nsqueue = \"/usr/bin/squeu\"\n");
  std::vector<std::string> warnings;
  load_daemon_config(dir / "musterd.toml", true, {}, &warnings);
  const auto said = [&](const std::string& text) {
    return std::any_of(warnings.begin(), warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  INFO(fmt::format("{}", fmt::join(warnings, "\n")));
  CHECK(said("musterd.toml:2:9: daemon.group: group muster-no-group does not exist"));
  CHECK(said("musterd.toml:4:11: node.ib_hcas: this host has no muster_hca9"));
  CHECK(said("finds no InfiniBand device and falls back to TCP sockets"));
  CHECK(
      said("health.kernel_log: cannot read /nonexistent/kmsg (No such file or directory): "
           "preflight skips its Xid check"));
  CHECK(said("health.shm_dir: /nonexistent/shm is no directory"));
  CHECK(
      said("slurm.squeue: cannot run /usr/bin/squeu (no such executable): a job's owner cannot "
           "be asked of Slurm, so only root may record a Slurm job id"));
  // a directory where a program or the log should be, and a slurm.conf that is not there
  muster::test::write_file(dir / "musterd.toml",
                           "[health]\nkernel_log = \"/tmp\"\n[slurm]\nsqueue = \"/tmp\"\n"
                           "conf = \"/nonexistent/slurm.conf\"\n");
  warnings.clear();
  load_daemon_config(dir / "musterd.toml", true, {}, &warnings);
  CHECK(said("health.kernel_log: /tmp is a directory"));
  CHECK(said("slurm.squeue: cannot run /tmp (no such executable)"));
  CHECK(said("slurm.conf: /nonexistent/slurm.conf is no file"));
  // the same keys set to what the host has: none of these
  muster::test::write_file(dir / "musterd.toml",
                           "[daemon]\ngroup = \"\"\n[health]\nkernel_log = \"" +
                               (dir / "musterd.toml").string() +
                               "\"\nshm_dir = \"/tmp\"\n[slurm]\nsqueue = \"\"\n");
  warnings.clear();
  load_daemon_config(dir / "musterd.toml", true, {}, &warnings);
  CHECK(warnings.empty());
}

TEST_CASE("a socket path is absolute and fits a unix socket, and its mode has no special bits",
          "[daemon_config]") {
  CHECK_THAT(error_of("[daemon]\nsocket = \"rel.sock\"\n"),
             Catch::Contains("musterd.toml:2:10: daemon.socket: \"rel.sock\" is relative"));
  CHECK_THAT(error_of("[daemon]\nsocket = \"/" + std::string(120, 'a') + "\"\n"),
             Catch::Contains("is 121 bytes; a unix socket's path holds at most 107"));
  CHECK_THAT(error_of("[daemon]\nmode = \"7777\"\n"),
             Catch::Contains("daemon.mode: \"7777\" sets setuid, setgid or sticky bits"));
}

TEST_CASE("a reload names the [daemon] keys it cannot apply", "[daemon_config]") {
  daemon_config running, loaded;
  CHECK(muster::daemon::daemon_keys_changed(running, loaded).empty());
  loaded.daemon.socket = "/run/other.sock";
  loaded.daemon.keep_days = 7;
  loaded.health.min_shm_mib = 1;  // applied by the reload: not named
  CHECK(muster::daemon::daemon_keys_changed(running, loaded) == "daemon.socket, daemon.keep_days");
}
