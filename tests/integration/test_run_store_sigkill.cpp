// The run store survives its writer being killed: run_store_writer (a real process) appends to
// one node file and reports each commit on stdout; this test SIGKILLs it after a random number
// of reported commits, 50 times on the same file, and after every kill checks that the file
// passes `PRAGMA integrity_check` and still holds every commit that was reported.
//
// The seed is random per run and printed on failure; set MUSTER_TEST_SEED to replay one.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "common/run_dir.hpp"
#include "common/run_reader.hpp"
#include "common/run_store.hpp"
#include "tests/support/seed.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/unprivileged.hpp"

namespace fs = std::filesystem;
using namespace muster::store;

namespace {

constexpr int kKills = 50;
constexpr int kNumRanks = 4;          // as in run_store_writer.cpp
constexpr long long kStepsPerRun = 1'000'000;  // run i writes steps from (i + 1) * kStepsPerRun

// Complete lines from a pipe; a last line without its newline (a kill mid-print) is dropped.
class line_reader {
 public:
  explicit line_reader(int fd) : fd_(fd) {}
  ~line_reader() { close(fd_); }

  // The next line, or nullopt at end of file. Fails the test after 20 s without a line.
  std::optional<std::string> next() {
    for (;;) {
      if (auto end = buffer_.find('\n'); end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return line;
      }
      pollfd pfd{fd_, POLLIN, 0};
      int ready = poll(&pfd, 1, 20'000);
      REQUIRE(ready > 0);
      char chunk[4096];
      ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buffer_;
};

// What one writer process reported as committed.
struct reported {
  long long first_step = 0;
  std::optional<long long> last_step;  // every step in [first_step, last_step] is committed
  std::set<long long> events;
  int commits = 0;

  void take(const std::string& line) {
    REQUIRE(line.size() > 2);
    long long value = std::stoll(line.substr(2));
    if (line[0] == 'S') last_step = value;
    if (line[0] == 'E') events.insert(value);
    ++commits;
  }
};

// Checks that the file holds every reported commit of `run`.
void check_commits(const run_reader& reader, const reported& run) {
  if (run.last_step) {
    auto steps = reader.steps(run.first_step, *run.last_step);
    REQUIRE(steps.size() == static_cast<size_t>((*run.last_step - run.first_step + 1) * kNumRanks));
    size_t misplaced = 0;  // counted, not asserted per row: Catch assertions are slow
    for (size_t i = 0; i < steps.size(); ++i) {
      misplaced += steps[i].step != run.first_step + static_cast<long long>(i / kNumRanks) ||
                   steps[i].rank != static_cast<long long>(i % kNumRanks);
    }
    REQUIRE(misplaced == 0);
  }
  std::set<long long> found;
  std::string prefix = std::to_string(run.first_step) + "/";
  for (const auto& event : reader.events()) {
    if (event.kind == "tick" && event.message.starts_with(prefix)) {
      found.insert(std::stoll(event.message.substr(prefix.size())));
    }
  }
  for (long long event : run.events) {
    INFO("event " << prefix << event);
    REQUIRE(found.count(event) == 1);
  }
}

// Starts a writer, lets it report `target` commits, waits `delay`, kills it, and returns all
// it reported (lines still in the pipe after its death count: they were printed after a commit).
reported kill_writer(const fs::path& db, long long first_step, unsigned seed, int target,
                     std::chrono::microseconds delay) {
  auto child = muster::test::spawn_process({std::string(MUSTER_TEST_BIN_DIR) + "/run_store_writer",
                                            db.string(), std::to_string(first_step),
                                            std::to_string(seed)});
  line_reader lines(child.out_fd);
  reported run;
  run.first_step = first_step;
  while (run.commits < target) {
    auto line = lines.next();
    REQUIRE(line);  // the writer ended on its own: its stderr says why
    run.take(*line);
  }
  std::this_thread::sleep_for(delay);
  REQUIRE(kill(child.pid, SIGKILL) == 0);
  auto result = muster::test::wait_process(child.pid);
  REQUIRE(result.signal == SIGKILL);
  while (auto line = lines.next()) run.take(*line);
  return run;
}

}  // namespace

TEST_CASE("a node file keeps every reported commit through 50 SIGKILLs of its writer",
          "[run_store][sigkill]") {
  const std::uint64_t seed = muster::test::test_seed();
  INFO("MUSTER_TEST_SEED=" << seed);
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int> commits(0, 40);
  std::uniform_int_distribution<int> delay_us(0, 3000);

  muster::test::temp_dir tmp;
  run_paths paths(tmp.path(), "sigkill");
  paths.create();
  const fs::path db = paths.node_db("victim");

  std::vector<reported> runs;
  auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < kKills; ++round) {
    INFO("kill " << round);
    reported run = kill_writer(db, (round + 1) * kStepsPerRun, static_cast<unsigned>(random()),
                               commits(random),
                               std::chrono::microseconds(delay_us(random)));
    runs.push_back(run);
    if (!fs::exists(db)) {  // killed before SQLite created the file: only possible at first
      REQUIRE(run.commits == 0);
      continue;
    }
    run_reader reader(paths.dir());
    REQUIRE(reader.integrity_check() == "ok");
    check_commits(reader, run);
  }
  auto elapsed = std::chrono::steady_clock::now() - start;

  // Every earlier run's commits are still there at the end, and after a clean reopen.
  for (const reported& run : runs) check_commits(run_reader(paths.dir()), run);
  { node_writer reopened(db); }
  CHECK_FALSE(fs::exists(db.string() + "-wal"));
  run_reader reader(paths.dir());
  REQUIRE(reader.integrity_check() == "ok");
  for (const reported& run : runs) check_commits(reader, run);

  long long total = 0;
  for (const reported& run : runs) total += run.commits;
  std::printf("run_store sigkill: %d kills, %lld reported commits, %.1f s\n", kKills, total,
              std::chrono::duration<double>(elapsed).count());
}

TEST_CASE("a reader that cannot write the directory reads a file whose writer was SIGKILLed",
          "[run_store][sigkill]") {
  muster::test::temp_dir tmp;
  run_paths paths(tmp.path(), "sigkill");
  paths.create();
  const fs::path db = paths.node_db("victim");
  reported run = kill_writer(db, kStepsPerRun, 1, 12, std::chrono::microseconds(0));
  REQUIRE(run.last_step);
  REQUIRE(fs::exists(db.string() + "-wal"));  // the commits may still be only in the WAL

  auto read_only = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read |
                   fs::perms::others_exec;
  fs::permissions(tmp.path(), read_only);
  fs::permissions(paths.dir(), read_only);
  if (!muster::test::reachable_by_nobody(paths.dir())) {
    WARN("skipped: user nobody cannot reach " << paths.dir().string()
                                              << " (a parent directory denies search); run "
                                                 "with TMPDIR=/tmp to check read-only reading");
    fs::permissions(paths.dir(), fs::perms::owner_all);
    fs::permissions(tmp.path(), fs::perms::owner_all);
    return;
  }
  std::string seen = muster::test::run_unprivileged([&] {
    run_reader reader(paths.dir());
    auto steps = reader.steps(kStepsPerRun, *run.last_step);
    return reader.integrity_check() + " " + std::to_string(steps.size());
  });
  fs::permissions(paths.dir(), fs::perms::owner_all);
  fs::permissions(tmp.path(), fs::perms::owner_all);
  CHECK(seen == "ok " + std::to_string((*run.last_step - kStepsPerRun + 1) * kNumRanks));
}
