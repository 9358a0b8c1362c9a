// Tests of launcher/daemon_client.hpp without a daemon: what the CLI says of musterd's replies.
#include <catch2/catch.hpp>

#include <string>

#include "launcher/daemon_client.hpp"

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
