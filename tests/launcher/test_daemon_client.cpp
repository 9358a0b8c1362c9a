// Tests of launcher/daemon_client.hpp without a daemon: what the CLI says of musterd's replies
// and how it says to start an absent one.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "launcher/daemon_client.hpp"
#include "tests/support/temp_dir.hpp"

using muster::launcher::reply_error_text;

TEST_CASE("an error reply reads as its message and code, never as raw JSON", "[daemon_client]") {
  const std::string unavailable =
      R"({"version":1,"ok":false,"error":{"code":"unavailable","message":"cannot tell who owns )"
      R"(job 123: squeue --jobs=123: squeue: error: down; try again when slurmctld answers"}})";
  CHECK(reply_error_text(unavailable) ==
        "cannot tell who owns job 123: squeue --jobs=123: squeue: error: down; try again when "
        "slurmctld answers (unavailable)");
  CHECK(reply_error_text(R"({"ok":false,"error":{"message":"no code"}})") == "no code");
  // what is no error reply is quoted, cut short
  CHECK(reply_error_text(R"({"ok":false})") == R"(a reply muster does not read: {"ok":false})");
  CHECK(reply_error_text(R"({"ok":false,"error":{"message":7}})").starts_with("a reply muster"));
  CHECK(reply_error_text(std::string(500, 'x')).size() ==
        std::string("a reply muster does not read: ").size() + 200);
}

TEST_CASE("the hint to start an absent musterd is systemctl only where systemd runs the host",
          "[daemon_client]") {
  using muster::launcher::daemon_start_hint;
  muster::test::temp_dir dir("daemon-client");
  std::filesystem::create_directories(dir / "run/systemd/system");
  CHECK(daemon_start_hint("/run/muster/musterd.sock", dir / "run/systemd/system") ==
        "start it: systemctl start musterd");
  // no /run/systemd/system (a container, a test machine): the command docs/quickstart.md gives
  CHECK(daemon_start_hint("/run/muster/musterd.sock", dir / "none") ==
        "no systemd runs this host: start it as root, musterd > /var/log/musterd.log 2>&1 &; or "
        "name the socket of one running elsewhere: MUSTER_DAEMON_SOCKET=PATH");
  CHECK(daemon_start_hint("/tmp/musterd.sock", dir / "none") ==
        "no systemd runs this host: start it, musterd --socket /tmp/musterd.sock --state-dir DIR "
        "> musterd.log 2>&1 &");
}
