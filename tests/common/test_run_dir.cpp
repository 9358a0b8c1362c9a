// Tests of common/run_dir: run ids, the run directory layout, and the checks on names that
// become file names.
#include <catch2/catch.hpp>

#include <chrono>
#include <cctype>

#include "common/error.hpp"
#include "common/run_dir.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace std::chrono;
using muster::errc;
using muster::store::run_paths;

namespace {

// Whether `id` is "job-" then 8 digits, '-', 6 digits, '-', 4 lower-case hex digits.
bool has_run_id_format(const std::string& id) {
  const std::string shape = "job-dddddddd-dddddd-xxxx";
  if (id.size() != shape.size()) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    bool ok = shape[i] == 'd'   ? std::isdigit(static_cast<unsigned char>(c)) != 0
              : shape[i] == 'x' ? std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(c)
                                : c == shape[i];
    if (!ok) return false;
  }
  return true;
}

system_clock::time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s};
}

}  // namespace

TEST_CASE("run ids are the name, the UTC time and a 4-digit hex suffix", "[run_dir]") {
  CHECK(muster::store::make_run_id("moe-small", at(2026, 11, 22, 14, 30, 5), 0x9f3a) ==
        "moe-small-20261122-143005-9f3a");
  CHECK(muster::store::make_run_id("a", at(2026, 1, 2, 3, 4, 5), 0x12345) ==
        "a-20260102-030405-2345");
}

TEST_CASE("run ids of one job sort by start time", "[run_dir]") {
  auto early = muster::store::make_run_id("job", at(2026, 9, 30, 23, 59, 59), 0xffff);
  auto late = muster::store::make_run_id("job", at(2026, 10, 1, 0, 0, 0), 0x0000);
  CHECK(early < late);
}

TEST_CASE("run ids sanitise the job name into a safe file name", "[run_dir]") {
  auto when = at(2026, 11, 22, 14, 30, 5);
  using muster::store::make_run_id;
  CHECK(make_run_id("my job/../x", when, 1) == "my_job_.._x-20261122-143005-0001");
  CHECK(make_run_id("..-.hidden", when, 1) == "hidden-20261122-143005-0001");
  CHECK(make_run_id("", when, 1) == "run-20261122-143005-0001");
  CHECK(make_run_id("\xc3\xa9t\xc3\xa9", when, 1) == "__t__-20261122-143005-0001");
  CHECK(make_run_id(std::string(100, 'x'), when, 1) ==
        std::string(48, 'x') + "-20261122-143005-0001");
  for (auto name : {"my job/../x", "..", "/etc/passwd", "a\nb"}) {
    CHECK_NOTHROW(muster::store::check_file_component("run id", make_run_id(name, when, 7)));
  }
}

TEST_CASE("run ids drawn at random differ and keep the format", "[run_dir]") {
  auto when = system_clock::now();
  auto a = muster::store::make_run_id("job", when);
  CHECK(has_run_id_format(a));
  CHECK_FALSE(has_run_id_format("job-20261122-143005-9F3A"));
  bool differs = false;
  for (int i = 0; i < 8 && !differs; ++i) differs = muster::store::make_run_id("job", when) != a;
  CHECK(differs);
}

TEST_CASE("names used in file names reject slashes, dot-dot and odd characters", "[run_dir]") {
  using muster::store::check_file_component;
  for (const std::string& bad : std::vector<std::string>{
           "", ".", "..", "../x", "a/b", "-rf", ".hidden", "a b", "a\\b", std::string(129, 'h'),
           std::string("a\0b", 3)}) {
    INFO("value: " << bad);
    auto e = muster::test::expect_error([&] { check_file_component("hostname", bad); });
    CHECK(e.category() == errc::invalid_input);
    CHECK_THAT(e.what(), Catch::Contains("hostname"));
  }
  CHECK_NOTHROW(check_file_component("hostname", "gpu-a07.cluster_1"));
  CHECK_NOTHROW(check_file_component("hostname", std::string(128, 'h')));
}

TEST_CASE("run paths name the node files, the config and the rank logs", "[run_dir]") {
  run_paths paths("/runs", "job-20261122-143005-9f3a");
  CHECK(paths.dir() == fs::path("/runs/job-20261122-143005-9f3a"));
  CHECK(paths.run_id() == "job-20261122-143005-9f3a");
  CHECK(paths.node_db("gpu-a07") == paths.dir() / "node-gpu-a07.db");
  CHECK(paths.job_config() == paths.dir() / "job.toml");
  CHECK(paths.rank_log(12) == paths.dir() / "logs" / "rank-12.log");
  using muster::test::expect_error;
  CHECK(expect_error([&] { (void)paths.node_db("../evil"); }).category() == errc::invalid_input);
  CHECK(expect_error([&] { (void)paths.rank_log(-1); }).category() == errc::invalid_input);
  CHECK(expect_error([] { run_paths("/runs", ".."); }).category() == errc::invalid_input);
  CHECK(run_paths(fs::path("/runs/abc/")).run_id() == "abc");
}

TEST_CASE("creating a run directory makes the tree and may be repeated", "[run_dir]") {
  muster::test::temp_dir tmp;
  run_paths paths(tmp / "runs", "r1");
  paths.create();
  paths.create();
  CHECK(fs::is_directory(paths.dir()));
  CHECK(fs::is_directory(paths.logs_dir()));
}

TEST_CASE("creating a run directory under a file names the path and the reason", "[run_dir]") {
  muster::test::temp_dir tmp;
  muster::test::write_file(tmp / "plain", "x");
  run_paths paths(tmp / "plain", "r1");
  auto e = muster::test::expect_error([&] { paths.create(); });
  CHECK(e.category() == errc::io);
  CHECK_THAT(e.what(), Catch::Contains(paths.dir().string()));
  CHECK_THAT(e.what(), Catch::Contains("Not a directory"));
  CHECK_THAT(e.what(), Catch::Contains((tmp / "plain").string() + " is a file") &&
                           Catch::Contains("in the way") &&
                           Catch::Contains("launch.runs_dir"));
}

TEST_CASE("a runs_dir that is itself a file is named as in the way", "[run_dir]") {
  muster::test::temp_dir tmp;
  muster::test::write_file(tmp / "plain", "x");
  run_paths paths(tmp / "plain" / "deeper", "r1");
  auto e = muster::test::expect_error([&] { paths.create(); });
  CHECK_THAT(e.what(), Catch::Contains((tmp / "plain").string() + " is a file") &&
                           Catch::Contains("move it or set launch.runs_dir"));
}

TEST_CASE("listing a run directory finds only node files, sorted by host", "[run_dir]") {
  muster::test::temp_dir tmp;
  run_paths paths(tmp.path(), "r1");
  paths.create();
  for (auto name : {"node-b.db", "node-a.db", "node-a.db-wal", "node-a.db-shm", "job.toml",
                    "node-.db", "node-.x.db", "other.db"}) {
    muster::test::write_file(paths.dir() / name, "");
  }
  auto files = paths.node_dbs();
  REQUIRE(files.size() == 2);
  CHECK(files[0] == paths.node_db("a"));
  CHECK(files[1] == paths.node_db("b"));
  CHECK(muster::store::node_db_host(files[0]) == "a");
  CHECK(muster::store::node_db_host("node-.db").empty());
  CHECK(muster::store::node_db_host("node-a.db-wal").empty());
}

TEST_CASE("listing a missing run directory is an io error naming it", "[run_dir]") {
  muster::test::temp_dir tmp;
  run_paths paths(tmp.path(), "missing");
  auto e = muster::test::expect_error([&] { (void)paths.node_dbs(); });
  CHECK(e.category() == errc::io);
  CHECK_THAT(e.what(), Catch::Contains(paths.dir().string()) &&
                           Catch::Contains("check the run directory's path"));
  muster::test::write_file(tmp / "file", "");
  auto file = muster::test::expect_error([&] { (void)run_paths(tmp / "file").node_dbs(); });
  CHECK_THAT(file.what(), Catch::Contains("is a file, not a run directory"));
}

TEST_CASE("a bad name's control characters and NUL bytes are escaped in the message",
          "[run_dir]") {
  using muster::store::check_file_component;
  auto nul = muster::test::expect_error(
      [&] { check_file_component("hostname", std::string("a\0b\x1b[31m", 8)); });
  CHECK(std::string(nul.what()).find('\x1b') == std::string::npos);
  CHECK_THAT(nul.what(), Catch::Contains("'a\\x00b\\x1b[31m'") &&
                             Catch::Contains("character '\\x00' at offset 1"));
  auto newline = muster::test::expect_error([&] { check_file_component("run id", "\nx"); });
  CHECK_THAT(newline.what(), Catch::Contains("'\\x0ax'"));
  auto long_name = muster::test::expect_error(
      [&] { check_file_component("hostname", std::string(1000, '\x01')); });
  CHECK_THAT(long_name.what(), Catch::Contains("(1000 bytes)") &&
                                   Catch::Contains("1 to 128 characters"));
  CHECK(std::string(long_name.what()).size() < 400);
}

TEST_CASE("node file names pass the same rule as check_file_component", "[run_dir]") {
  for (const std::string& host : std::vector<std::string>{
           "a", "gpu-a07", ".x", "-x", "a b", std::string(128, 'h'), std::string(129, 'h'),
           std::string("a\0b", 3)}) {
    INFO("host: " << host);
    bool accepted = true;
    try {
      muster::store::check_file_component("hostname", host);
    } catch (const muster::error&) {
      accepted = false;
    }
    CHECK(muster::store::node_db_host("node-" + host + ".db") == (accepted ? host : ""));
  }
}
