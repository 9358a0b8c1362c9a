// Tests of the run store: node_writer (schema, migrations, typed writes), run_reader (merging,
// never modifying), and the error messages for full disks, read-only files and foreign files.
// The crash test (SIGKILL mid-write) is tests/integration/test_run_store_sigkill.cpp.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "common/error.hpp"
#include "common/run_dir.hpp"
#include "common/run_reader.hpp"
#include "common/run_store.hpp"
#include "common/run_store_schema.hpp"
#include "common/sqlite_db.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/unprivileged.hpp"

namespace fs = std::filesystem;
using muster::errc;
using namespace muster::store;

namespace {

// SQL that takes a file's runs table back to before version 4.
constexpr std::string_view kDropVersion4 =
    "ALTER TABLE runs DROP COLUMN slurm_cluster; ALTER TABLE runs DROP COLUMN slurm_task_job_id; ";
constexpr std::string_view kDropVersion5 = "ALTER TABLE steps DROP COLUMN mem_device; ";

run_record sample_run(const std::string& id = "job-20261122-143005-9f3a") {
  return run_record{id,       "job",         run_state::running,      1000,    2000,  4, 2,
                    "7781_3", "/r/job.toml", "[train]\nsteps = 10\n", "gpu-b", "7790"};
}

rank_record sample_rank(std::int64_t rank, const std::string& host) {
  return rank_record{rank,         host,         rank % 2,  4000 + rank, rank_state::running,
                     std::nullopt, std::nullopt, 100 + rank};
}

step_record sample_step(std::int64_t rank, std::int64_t step) {
  step_record s{rank,         step, 2.5 - 0.01 * static_cast<double>(step),
                4096,         0.25, (1ll << 33) + rank,
                10'000 + step};
  s.mem_device = "cuda";
  return s;
}

// The step as a file from before version 5 holds it.
step_record without_device(step_record s) {
  s.mem_device.clear();
  return s;
}

// A run directory with node files written through node_writer.
struct run_fixture {
  muster::test::temp_dir tmp;
  run_paths paths{tmp.path(), "r1"};
  run_fixture() { paths.create(); }
  node_writer writer(const std::string& host) { return node_writer(paths.node_db(host)); }
};

// Every file in a directory tree with its bytes and modification time.
std::map<std::string, std::pair<std::string, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    files[entry.path().string()] = {muster::test::read_file(entry.path()),
                                    fs::last_write_time(entry.path())};
  }
  return files;
}

}  // namespace

TEST_CASE("a new node file gets the current schema version and WAL mode", "[run_store]") {
  run_fixture fx;
  fs::path file = fx.paths.node_db("a");
  {
    node_writer writer(file);
    CHECK(writer.schema_version() == kSchemaVersion);
    CHECK(writer.file() == file);
    CHECK(fs::exists(file.string() + "-wal"));  // WAL mode: the log lives beside the file
  }
  CHECK_FALSE(fs::exists(file.string() + "-wal"));  // a clean close checkpoints and removes it
  node_writer again(file);
  CHECK(again.schema_version() == kSchemaVersion);
}

TEST_CASE("every record type round-trips through a node file", "[run_store]") {
  run_fixture fx;
  run_record run = sample_run();
  run_record bare = sample_run();
  bare.slurm_job_id.reset();
  bare.config_text.clear();
  bare.slurm_cluster.reset();
  bare.slurm_task_job_id.reset();
  rank_record ended{3, "gpu-b", 1, 77, rank_state::killed, 137, 9, 555};
  rank_record waiting{4,  "gpu-b", 2, std::nullopt, rank_state::pending, std::nullopt, std::nullopt,
                      556};
  step_record nan_step{3, 8, std::numeric_limits<double>::quiet_NaN(), 1, 1.5, 2, 3};
  step_record inf_step{3, 9, std::numeric_limits<double>::infinity(), -1, 0, 0, 4};
  event_record launcher_event{50, std::nullopt, severity::warn, "node_slow", "héllo ✓ 'q' \"x\""};
  event_record rank_event{40, 3, severity::error, "rank_exit", "rank 3 killed by signal 9"};
  {
    node_writer writer = fx.writer("gpu-b");
    writer.put_run(run);
    writer.put_rank(ended);
    writer.put_rank(waiting);
    writer.add_step(sample_step(3, 7));
    writer.add_steps(std::vector{nan_step, inf_step});
    writer.add_event(launcher_event);
    writer.add_event(rank_event);
    writer.add_event({60, 4, severity::debug, "d", ""});
    writer.add_event({70, 4, severity::info, "i", "x"});
  }
  run_reader reader(fx.paths.dir());
  CHECK(reader.hosts() == std::vector<std::string>{"gpu-b"});
  CHECK(reader.run() == run);
  CHECK(reader.ranks() == std::vector{ended, waiting});
  auto steps = reader.steps();
  REQUIRE(steps.size() == 3);
  CHECK(steps[0] == sample_step(3, 7));
  CHECK(std::isnan(steps[1].loss));
  CHECK(steps[1].step_time_s == 1.5);
  CHECK(steps[2] == inf_step);
  auto events = reader.events();
  REQUIRE(events.size() == 4);
  CHECK(events[0] == rank_event);
  CHECK(events[1] == launcher_event);
  CHECK(events[2].level == severity::debug);
  CHECK(events[3].level == severity::info);

  node_writer(fx.paths.node_db("gpu-b")).put_run(bare);
  CHECK(run_reader(fx.paths.dir()).run() == bare);
}

TEST_CASE("the engine's step metrics and the ranks' errors round-trip", "[run_store]") {
  run_fixture fx;
  step_record full = sample_step(1, 4);
  full.aux_loss = 0.012;
  full.z_loss = 0.0;
  full.grad_norm = 1.75;
  full.lr = 3e-4;
  full.tokens_per_s = 1850.5;
  full.mfu = 0.31;
  full.peak_mem_bytes = 1ll << 31;
  error_record in_backward{900, 1, 4, "backward", "collective_timeout", "[rank 1/2] ... timed out"};
  error_record at_start{800, 0, std::nullopt, "startup", "bad_input", "data: bad"};
  {
    node_writer writer = fx.writer("a");
    writer.put_rank(sample_rank(1, "a"));
    writer.add_steps(std::vector{full, sample_step(1, 5)});
    writer.add_error(in_backward);
    writer.add_error(at_start);
  }
  run_reader reader(fx.paths.dir());
  auto steps = reader.steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0] == full);
  CHECK(std::isnan(steps[1].mfu));  // not reported: NULL in the file, NaN when read
  CHECK(steps[1] == sample_step(1, 5));
  CHECK(reader.errors() == std::vector{at_start, in_backward});
}

TEST_CASE("a version 1 node file is migrated, keeping its steps", "[run_store]") {
  run_fixture fx;
  const fs::path file = fx.paths.node_db("a");
  {
    node_writer writer(file);
    writer.put_rank(sample_rank(0, "a"));
    writer.add_step(sample_step(0, 3));
  }
  {
    // Take the file back to version 1 (SQLite 3.35+ drops columns).
    sqlite_db db(file, open_mode::read_write);
    db.exec(
        "DROP TABLE errors; ALTER TABLE steps DROP COLUMN aux_loss; "
        "ALTER TABLE steps DROP COLUMN z_loss; ALTER TABLE steps DROP COLUMN grad_norm; "
        "ALTER TABLE steps DROP COLUMN lr; ALTER TABLE steps DROP COLUMN tokens_per_s; "
        "ALTER TABLE steps DROP COLUMN mfu; ALTER TABLE steps DROP COLUMN peak_mem_bytes; "
        "ALTER TABLE steps DROP COLUMN comm_wait_s; " +
            std::string(kDropVersion4) + std::string(kDropVersion5) + "PRAGMA user_version = 1",
        "test: make a version 1 file");
  }
  {
    node_writer writer(file);
    CHECK(writer.schema_version() == kSchemaVersion);
    writer.add_error({5, 0, 3, "forward", "oom", "out of memory"});
  }
  run_reader reader(fx.paths.dir());
  REQUIRE(reader.steps().size() == 1);
  CHECK(reader.steps()[0] == without_device(sample_step(0, 3)));
  CHECK(reader.errors().size() == 1);
}

TEST_CASE("a version 2 node file is read as it is, its steps without waits", "[run_store]") {
  run_fixture fx;
  const fs::path file = fx.paths.node_db("a");
  auto step = sample_step(0, 3);
  step.comm_wait_s = 0.25;
  {
    node_writer writer(file);
    writer.put_rank(sample_rank(0, "a"));
    writer.add_step(step);
  }
  CHECK(run_reader(fx.paths.dir()).steps() == std::vector{step});  // today's file: the wait kept
  {
    sqlite_db db(file, open_mode::read_write);
    db.exec("ALTER TABLE steps DROP COLUMN comm_wait_s; " + std::string(kDropVersion4) +
                std::string(kDropVersion5) + "PRAGMA user_version = 2",
            "test: make a version 2 file");
  }
  // a reader reads version 2 without migrating it (readers never write)
  run_reader reader(fx.paths.dir());
  const auto steps = reader.steps();
  REQUIRE(steps.size() == 1);
  CHECK(std::isnan(steps[0].comm_wait_s));
  step.comm_wait_s = kNotReported;
  step.mem_device.clear();
  CHECK(steps[0] == step);
  CHECK(reader.last_steps() == std::vector{step});
  CHECK(schema::user_version(sqlite_db(file, open_mode::read_only)) == 2);
}

TEST_CASE("a version 3 node file is read as it is, its run without a cluster", "[run_store]") {
  run_fixture fx;
  const fs::path file = fx.paths.node_db("a");
  run_record run = sample_run();
  fx.writer("a").put_run(run);
  CHECK(run_reader(fx.paths.dir()).runs() == std::vector{run});
  sqlite_db(file, open_mode::read_write)
      .exec(std::string(kDropVersion4) + std::string(kDropVersion5) + "PRAGMA user_version = 3",
            "test: make a version 3 file");
  run.slurm_cluster.reset();
  run.slurm_task_job_id.reset();
  CHECK(run_reader(fx.paths.dir()).runs() == std::vector{run});
  CHECK(schema::user_version(sqlite_db(file, open_mode::read_only)) == 3);
  fx.writer("a");  // a writer migrates it
  CHECK(schema::user_version(sqlite_db(file, open_mode::read_only)) == kSchemaVersion);
  CHECK(run_reader(fx.paths.dir()).runs() == std::vector{run});
}

TEST_CASE("a version 4 node file is read as it is, its steps without a memory device",
          "[run_store]") {
  run_fixture fx;
  const fs::path file = fx.paths.node_db("a");
  {
    node_writer writer = fx.writer("a");
    writer.put_rank(sample_rank(0, "a"));
    writer.add_step(sample_step(0, 3));
  }
  CHECK(run_reader(fx.paths.dir()).steps()[0].mem_device == "cuda");
  sqlite_db(file, open_mode::read_write)
      .exec(std::string(kDropVersion5) + "PRAGMA user_version = 4", "test: make a version 4 file");
  CHECK(run_reader(fx.paths.dir()).steps() == std::vector{without_device(sample_step(0, 3))});
  fx.writer("a").add_step(sample_step(0, 4));  // a writer migrates it, and says the device
  const auto steps = run_reader(fx.paths.dir()).steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].mem_device.empty());
  CHECK(steps[1] == sample_step(0, 4));
}

TEST_CASE("putting a rank again replaces the earlier record", "[run_store]") {
  run_fixture fx;
  node_writer writer = fx.writer("a");
  rank_record rank = sample_rank(0, "a");
  writer.put_rank(rank);
  rank.state = rank_state::failed;
  rank.exit_code = 3;
  rank.updated_ms = 999;
  writer.put_rank(rank);
  CHECK(run_reader(fx.paths.dir()).ranks() == std::vector{rank});
}

TEST_CASE("adding a step again replaces it, as a resumed run repeats steps", "[run_store]") {
  run_fixture fx;
  node_writer writer = fx.writer("a");
  writer.put_rank(sample_rank(0, "a"));
  writer.add_step(sample_step(0, 5));
  step_record again = sample_step(0, 5);
  again.loss = 9;
  writer.add_step(again);
  CHECK(run_reader(fx.paths.dir()).steps() == std::vector{again});
}

TEST_CASE("setting the run state changes state and time, and needs the run", "[run_store]") {
  run_fixture fx;
  node_writer writer = fx.writer("a");
  auto e = muster::test::expect_error([&] { writer.set_run_state("nope", run_state::failed, 1); });
  CHECK(e.category() == errc::store);
  CHECK_THAT(e.what(), Catch::Contains("'nope'") && Catch::Contains("put_run first"));
  run_record run = sample_run();
  writer.put_run(run);
  writer.set_run_state(run.run_id, run_state::succeeded, 9000);
  run.state = run_state::succeeded;
  run.updated_ms = 9000;
  CHECK(run_reader(fx.paths.dir()).run() == run);
  // put again (a requeued job's launcher): all is replaced but when the run first started
  run_record requeued = run;
  requeued.state = run_state::running;
  requeued.created_ms = run.created_ms + 60'000;
  requeued.updated_ms = run.created_ms + 60'000;
  writer.put_run(requeued);
  requeued.created_ms = run.created_ms;
  CHECK(run_reader(fx.paths.dir()).run() == requeued);
}

TEST_CASE("a node file belongs to one run", "[run_store]") {
  run_fixture fx;
  node_writer writer = fx.writer("a");
  writer.put_run(sample_run("first"));
  auto e = muster::test::expect_error([&] { writer.put_run(sample_run("second")); });
  CHECK(e.category() == errc::store);
  CHECK_THAT(e.what(), Catch::Contains("'first'") && Catch::Contains("'second'"));
  CHECK(run_reader(fx.paths.dir()).runs().size() == 1);
}

TEST_CASE("a batch of steps is stored whole or not at all", "[run_store]") {
  run_fixture fx;
  node_writer writer = fx.writer("a");
  writer.put_rank(sample_rank(0, "a"));
  std::vector batch{sample_step(0, 1), sample_step(0, 2), sample_step(7, 2)};  // no rank 7
  auto e = muster::test::expect_error([&] { writer.add_steps(batch); });
  CHECK(e.category() == errc::store);
  CHECK_THAT(e.what(), Catch::Contains("add step 2 of rank 7") && Catch::Contains("FOREIGN KEY") &&
                           Catch::Contains(fx.paths.node_db("a").string()) &&
                           Catch::Contains("put the rank (put_rank) before its steps"));
  auto single = muster::test::expect_error([&] { writer.add_step(sample_step(5, 1)); });
  CHECK_THAT(single.what(),
             Catch::Contains("rank 5 is not in this file") && Catch::Contains("put_rank"));
  CHECK(run_reader(fx.paths.dir()).steps().empty());
  batch.pop_back();
  writer.add_steps(batch);  // the writer is usable after a failed batch
  CHECK(run_reader(fx.paths.dir()).steps().size() == 2);
}

TEST_CASE("the reader merges node files: ranks, steps, events and last steps", "[run_store]") {
  run_fixture fx;
  node_writer a = fx.writer("a");
  node_writer b = fx.writer("b");
  run_record run_a = sample_run();
  run_record run_b = sample_run();
  run_b.state = run_state::failed;
  run_b.updated_ms = run_a.updated_ms + 1;
  a.put_run(run_a);
  b.put_run(run_b);
  for (int rank : {0, 2}) a.put_rank(sample_rank(rank, "a"));
  for (int rank : {1, 3}) b.put_rank(sample_rank(rank, "b"));
  for (int step = 0; step < 3; ++step) {
    a.add_steps(std::vector{sample_step(0, step), sample_step(2, step)});
    b.add_steps(std::vector{sample_step(3, step), sample_step(1, step)});
  }
  a.add_step(sample_step(2, 3));
  a.add_event({30, 0, severity::info, "a30", ""});
  a.add_event({10, std::nullopt, severity::info, "a10", ""});
  b.add_event({20, 1, severity::info, "b20", ""});
  b.add_event({30, 1, severity::info, "b30", ""});

  run_reader reader(fx.paths.dir());
  CHECK(reader.hosts() == std::vector<std::string>{"a", "b"});
  CHECK(reader.runs() == std::vector{run_a, run_b});
  CHECK(reader.run() == run_b);
  auto ranks = reader.ranks();
  REQUIRE(ranks.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(ranks[i] == sample_rank(i, i % 2 ? "b" : "a"));
  auto steps = reader.steps();
  REQUIRE(steps.size() == 13);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(steps[i] ==
          sample_step(static_cast<std::int64_t>(i % 4), static_cast<std::int64_t>(i / 4)));
  }
  CHECK(steps[12] == sample_step(2, 3));
  std::vector<std::string> kinds;
  for (const auto& event : reader.events()) kinds.push_back(event.kind);
  CHECK(kinds == std::vector<std::string>{"a10", "b20", "a30", "b30"});
  CHECK(reader.events(25).size() == 2);
  CHECK(reader.last_steps() ==
        std::vector{sample_step(0, 2), sample_step(1, 2), sample_step(2, 3), sample_step(3, 2)});
}

TEST_CASE("step queries select a range of steps and a rank", "[run_store]") {
  run_fixture fx;
  node_writer writer = fx.writer("a");
  writer.put_rank(sample_rank(0, "a"));
  writer.put_rank(sample_rank(1, "a"));
  for (int step = 0; step < 10; ++step) {
    writer.add_steps(std::vector{sample_step(0, step), sample_step(1, step)});
  }
  run_reader reader(fx.paths.dir());
  CHECK(reader.steps(3, 5).size() == 6);
  CHECK(reader.steps(8, 100, 1) == std::vector{sample_step(1, 8), sample_step(1, 9)});
  CHECK(reader.steps(0, 100, 5).empty());
}

TEST_CASE("a reader sees a live writer's later commits, even if it opened first", "[run_store]") {
  run_fixture fx;
  { fx.writer("a").put_rank(sample_rank(0, "a")); }
  run_reader reader(fx.paths.dir());  // no writer yet: opened immutable
  CHECK(reader.steps().empty());
  node_writer writer = fx.writer("a");
  writer.add_step(sample_step(0, 1));
  CHECK(reader.steps().size() == 1);
  writer.add_step(sample_step(0, 2));
  CHECK(reader.last_steps() == std::vector{sample_step(0, 2)});
}

TEST_CASE("a reader creates and modifies no file", "[run_store]") {
  run_fixture fx;
  {
    node_writer writer = fx.writer("a");
    writer.put_run(sample_run());
    writer.put_rank(sample_rank(0, "a"));
    writer.add_step(sample_step(0, 0));
    writer.add_event({1, 0, severity::info, "k", "m"});
  }
  auto before = snapshot(fx.tmp.path());
  {
    run_reader reader(fx.paths.dir());
    CHECK(reader.run().has_value());
    CHECK(reader.ranks().size() == 1);
    CHECK(reader.steps().size() == 1);
    CHECK(reader.last_steps().size() == 1);
    CHECK(reader.events().size() == 1);
    CHECK(reader.integrity_check() == "ok");
  }
  CHECK(snapshot(fx.tmp.path()) == before);
}

TEST_CASE("a node file from a newer muster is refused, naming both versions", "[run_store]") {
  run_fixture fx;
  fs::path file = fx.paths.node_db("a");
  { fx.writer("a"); }
  sqlite_db(file, open_mode::read_write).exec("PRAGMA user_version = 99", "test: bump version");
  REQUIRE_FALSE(fs::exists(file.string() + "-wal"));
  auto before = snapshot(fx.tmp.path());
  for (auto open : std::vector<std::function<void()>>{[&] { run_reader r(fx.paths.dir()); },
                                                      [&] { node_writer w(file); }}) {
    auto e = muster::test::expect_error(open);
    CHECK(e.category() == errc::store);
    CHECK_THAT(e.what(), Catch::Contains("schema version 99") && Catch::Contains("newer muster") &&
                             Catch::Contains(fmt::format("up to {}", kSchemaVersion)) &&
                             Catch::Contains(file.string()));
    CHECK(snapshot(fx.tmp.path()) == before);  // refused before anything was written
  }
}

TEST_CASE("a file with tables but no schema version is refused and left unchanged", "[run_store]") {
  run_fixture fx;
  fs::path file = fx.paths.node_db("a");
  sqlite_db(file, open_mode::read_write)
      .exec("CREATE TABLE t (x); PRAGMA user_version = 0", "test: foreign file");
  auto before = snapshot(fx.tmp.path());
  auto foreign = muster::test::expect_error([&] { run_reader r(fx.paths.dir()); });
  CHECK_THAT(foreign.what(), Catch::Contains("not a muster run store"));
  CHECK_THAT(muster::test::expect_error([&] { node_writer w(file); }).what(),
             Catch::Contains("not a muster run store"));
  CHECK(snapshot(fx.tmp.path()) == before);
}

TEST_CASE("readers of older files read the columns added since as NULL, by whole name only",
          "[run_store]") {
  using muster::store::schema::sql_for_version;
  const std::string sql =
      "SELECT s.comm_wait_s, slurm_cluster, slurm_cluster_name, x_slurm_task_job_id, "
      "slurm_task_job_id FROM runs, steps s";
  CHECK(sql_for_version(sql, 2) ==
        "SELECT NULL, NULL, slurm_cluster_name, x_slurm_task_job_id, NULL FROM runs, steps s");
  CHECK(sql_for_version(sql, 3) ==
        "SELECT s.comm_wait_s, NULL, slurm_cluster_name, x_slurm_task_job_id, NULL FROM runs, "
        "steps s");
  CHECK(sql_for_version(sql, muster::store::schema::kCurrentVersion) == sql);
  // a name twice, and one that ends the text
  CHECK(sql_for_version("slurm_cluster = slurm_cluster", 3) == "NULL = NULL");
}

TEST_CASE("a reader refuses a schema older than the one it reads and never migrates it",
          "[run_store]") {
  // No muster older than schema version 1 exists, so the reader's check is asked to read
  // version kSchemaVersion + 1 and given a current file: what a future reader does with today's.
  run_fixture fx;
  fs::path file = fx.paths.node_db("a");
  { fx.writer("a").put_rank(sample_rank(0, "a")); }
  auto before = snapshot(fx.tmp.path());
  {
    sqlite_db db(file, open_mode::read_immutable);  // as the reader opens a closed file
    auto e = muster::test::expect_error([&] { schema::check_readable(db, kSchemaVersion + 1); });
    CHECK(e.category() == errc::store);
    CHECK_THAT(e.what(), Catch::Contains(fmt::format("schema version {} is older than version {}",
                                                     kSchemaVersion, kSchemaVersion + 1)) &&
                             Catch::Contains("never migrate") && Catch::Contains(file.string()));
    CHECK(schema::user_version(db) == kSchemaVersion);
    // And the other way round: an older reader refuses today's file as newer.
    CHECK_THAT(
        muster::test::expect_error([&] { schema::check_readable(db, kSchemaVersion - 1); }).what(),
        Catch::Contains(
            fmt::format("schema version {} was written by a newer muster", kSchemaVersion)) &&
            Catch::Contains(fmt::format("up to {}", kSchemaVersion - 1)));
    CHECK(schema::check_readable(db));
  }
  CHECK(snapshot(fx.tmp.path()) == before);
}

TEST_CASE("a reader reads an empty node file as holding nothing", "[run_store]") {
  run_fixture fx;
  muster::test::write_file(fx.paths.node_db("dead"), "");
  { fx.writer("live").put_rank(sample_rank(0, "live")); }
  run_reader reader(fx.paths.dir());
  CHECK(reader.hosts() == std::vector<std::string>{"dead", "live"});
  CHECK(reader.ranks().size() == 1);
  CHECK(reader.integrity_check() == "ok");
}

TEST_CASE("a reader needs a directory with node files", "[run_store]") {
  run_fixture fx;
  auto none = muster::test::expect_error([&] { run_reader r(fx.paths.dir()); });
  CHECK(none.category() == errc::store);
  CHECK_THAT(none.what(), Catch::Contains("no node-*.db"));
  auto missing = muster::test::expect_error([&] { run_reader r(fx.tmp / "missing"); });
  CHECK(missing.category() == errc::io);
}

TEST_CASE("a file that is not SQLite is refused with what to do", "[run_store]") {
  run_fixture fx;
  muster::test::write_file(fx.paths.node_db("a"), std::string(8192, 'x'));
  try {
    fx.writer("a");
  } catch (const muster::store::store_error& foreign) {
    CHECK_FALSE(foreign.disk_full());  // no full disk however its message reads
  }
  auto e = muster::test::expect_error([&] { fx.writer("a"); });
  CHECK(e.category() == errc::store);
  CHECK_THAT(e.what(), Catch::Contains("SQLITE_NOTADB") && Catch::Contains("move it out"));
}

TEST_CASE("a full disk is reported plainly, with what to do", "[run_store]") {
  run_fixture fx;
  node_writer writer(fx.paths.node_db("a"), {.max_bytes = 64 * 1024});
  writer.put_rank(sample_rank(0, "a"));
  try {
    for (int batch = 0; batch < 1000; ++batch) {
      std::vector<step_record> steps;
      for (int i = 0; i < 100; ++i) steps.push_back(sample_step(0, batch * 100 + i));
      writer.add_steps(steps);
    }
    FAIL("1000 batches of steps fit in 64 KiB");
  } catch (const muster::store::store_error& e) {
    CHECK(e.category() == errc::store);
    CHECK_THAT(e.what(), Catch::Contains("SQLITE_FULL") && Catch::Contains("is full") &&
                             Catch::Contains("free space") &&
                             Catch::Contains(fx.paths.node_db("a").string()));
    // and it says so to callers that keep room for what matters (the run recorder)
    CHECK(e.disk_full());
    CHECK_FALSE(e.busy());
  }
  CHECK(run_reader(fx.paths.dir()).integrity_check() == "ok");
}

TEST_CASE("an unwritable directory or file is reported with what to do", "[run_store]") {
  run_fixture fx;
  fs::path ro_dir = fx.tmp / "ro";
  fs::create_directory(ro_dir);
  { node_writer(fx.paths.node_db("a")).put_rank(sample_rank(0, "a")); }
  { node_writer(ro_dir / "node-b.db").put_rank(sample_rank(1, "b")); }
  fs::permissions(fx.tmp.path(),
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(fx.paths.dir(), fs::perms::owner_all | fs::perms::others_all);
  fs::permissions(fx.paths.node_db("a"), fs::perms::owner_read | fs::perms::others_read);
  fs::permissions(ro_dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read |
                              fs::perms::others_exec);
  if (!muster::test::reachable_by_nobody(fx.paths.dir())) {
    WARN("skipped: user nobody cannot reach " << fx.paths.dir().string()
                                              << " (a parent directory denies search); run "
                                                 "with TMPDIR=/tmp to check permissions");
    fs::permissions(ro_dir, fs::perms::owner_all);
    return;
  }
  auto try_writer = [](fs::path file) {
    return [file] {
      node_writer w(file);
      return std::string("opened");
    };
  };

  std::string read_only_file = muster::test::run_unprivileged(try_writer(fx.paths.node_db("a")));
  CHECK_THAT(read_only_file, Catch::StartsWith("error: run store") &&
                                 Catch::Contains("SQLITE_READONLY") &&
                                 Catch::Contains("read-only for this user"));
  std::string new_in_ro_dir = muster::test::run_unprivileged(try_writer(ro_dir / "node-c.db"));
  CHECK_THAT(new_in_ro_dir, Catch::Contains((ro_dir / "node-c.db").string()) &&
                                Catch::Contains("is not writable by this user"));
  // A reader needs no write access: it reads a closed file in place, creating nothing.
  std::string read = muster::test::run_unprivileged(
      [&] { return fmt::format("{} ranks", run_reader(ro_dir).ranks().size()); });
  CHECK(read == "1 ranks");
  CHECK_FALSE(fs::exists(ro_dir / "node-b.db-wal"));
  fs::permissions(ro_dir, fs::perms::owner_all);
}

TEST_CASE("a reader sees rows a writer added and closed between two queries", "[run_store]") {
  for (bool old_mtime : {false, true}) {
    INFO("file mtime set an hour back before the reader opened: " << old_mtime);
    run_fixture fx;
    fs::path file = fx.paths.node_db("a");
    { fx.writer("a").put_rank(sample_rank(0, "a")); }
    REQUIRE_FALSE(fs::exists(file.string() + "-wal"));
    if (old_mtime) {
      fs::last_write_time(file, fs::file_time_type::clock::now() - std::chrono::hours(1));
    }
    run_reader reader(fx.paths.dir());  // no writer: opened immutable
    CHECK(reader.steps().empty());
    CHECK(reader.ranks().size() == 1);
    {
      node_writer writer = fx.writer("a");
      writer.put_rank(sample_rank(1, "a"));
      writer.add_steps(std::vector{sample_step(0, 1), sample_step(1, 1)});
    }
    REQUIRE_FALSE(fs::exists(file.string() + "-wal"));  // a clean close removed it again
    CHECK(reader.steps() == std::vector{sample_step(0, 1), sample_step(1, 1)});
    CHECK(reader.ranks().size() == 2);
    CHECK(reader.integrity_check() == "ok");
  }
}

TEST_CASE("a reader opens files under paths with '//', '?', '#', '%' and spaces", "[run_store]") {
  muster::test::temp_dir tmp;
  for (std::string runs : {"/" + tmp.path().string(), tmp.path().string() + "/a b?c#d%41e%"}) {
    INFO("runs_dir: " << runs);
    run_paths paths(runs, "r1");
    paths.create();
    { node_writer(paths.node_db("a")).put_rank(sample_rank(0, "a")); }
    run_reader reader(paths.dir());
    CHECK(reader.ranks() == std::vector{sample_rank(0, "a")});
  }
}

TEST_CASE("SQLite URIs keep any path the file system's own", "[run_store]") {
  CHECK(sqlite_file_uri("/a/b.db", "mode=ro") == "file:///a/b.db?mode=ro");
  CHECK(sqlite_file_uri("//srv/x y?z#w%41.db", "") == "file:////srv/x%20y%3Fz%23w%2541.db");
  CHECK(sqlite_file_uri("/\xc3\xa9\n", "") == "file:///%C3%A9%0A");
  CHECK(sqlite_file_uri("rel/a.db", "mode=rwc") ==
        "file://" + (fs::current_path() / "rel/a.db").string() + "?mode=rwc");
}

TEST_CASE("a reader keeps one row per (step, rank) across node files, the newest", "[run_store]") {
  // A requeued job whose rank 0 moved from host a to host b: both files hold steps 1 and 2.
  run_fixture fx;
  step_record old1 = sample_step(0, 1), old2 = sample_step(0, 2);
  step_record new2 = sample_step(0, 2), new3 = sample_step(0, 3);
  new2.time_ms = old2.time_ms + 1000;
  new2.loss = 7;
  step_record tie1 = old1;  // the same time: the first host in host order wins
  tie1.loss = 8;
  {
    node_writer a = fx.writer("a");
    a.put_rank(sample_rank(0, "a"));
    a.add_steps(std::vector{old1, old2});
    node_writer b = fx.writer("b");
    rank_record moved = sample_rank(0, "b");
    moved.updated_ms += 1000;
    b.put_rank(moved);
    b.add_steps(std::vector{tie1, new2, new3});
  }
  run_reader reader(fx.paths.dir());
  CHECK(reader.steps() == std::vector{old1, new2, new3});
  CHECK(reader.steps(2, 2, 0) == std::vector{new2});
  CHECK(reader.last_steps() == std::vector{new3});
  REQUIRE(reader.ranks().size() == 1);
  CHECK(reader.ranks()[0].host == "b");
}

TEST_CASE("a reader picks up a node file created after it opened", "[run_store]") {
  run_fixture fx;
  { fx.writer("b").put_rank(sample_rank(1, "b")); }
  run_reader reader(fx.paths.dir());
  CHECK(reader.hosts() == std::vector<std::string>{"b"});
  { fx.writer("a").put_rank(sample_rank(0, "a")); }
  CHECK(reader.ranks() == std::vector{sample_rank(0, "a"), sample_rank(1, "b")});
  CHECK(reader.hosts() == std::vector<std::string>{"a", "b"});
}
