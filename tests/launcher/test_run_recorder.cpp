// run_recorder: what a rank's end puts in a real run store, from its real error file.
#include <catch2/catch.hpp>

#include "common/run_dir.hpp"
#include "common/run_reader.hpp"
#include "common/run_store.hpp"
#include "common/worker_error.hpp"
#include "launcher/run_recorder.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;

namespace {

// A fresh run directory under `tmp`, its folders made.
store::run_paths fresh_run(const test::temp_dir& tmp) {
  store::run_paths paths(tmp.path(), "job-20261128-100000-abcd");
  paths.create();
  return paths;
}

}  // namespace

TEST_CASE("a rank's end records its error file, not one an earlier attempt left",
          "[run_recorder]") {
  test::temp_dir tmp;
  const auto paths = fresh_run(tmp);
  const auto now = store::now_ms();
  {
    store::node_writer db(paths.node_db("node-a"));
    launcher::run_recorder recorder(db, paths, "node-a", 0);
    // the first start's error, written before this attempt started its rank (a requeued job)
    test::write_file(
        paths.rank_error_file(0),
        format_worker_error({"first start's error", "forward", "exception", 3, now - 60'000}));
    launcher::rank_exit ended;
    ended.rank = 0;
    ended.pid = 4242;
    ended.signal = 15;  // stopped by scancel: it wrote no error of its own
    ended.started_ms = now - 1000;
    ended.time_ms = now;
    recorder({launcher::supervisor_event::kind::exited, 0, 4242, 0, &ended, ""});
    // a second rank that wrote its error in this attempt
    test::write_file(
        paths.rank_error_file(1),
        format_worker_error({"this start's error", "backward", "exception", 12, now - 500}));
    ended.rank = 1;
    ended.signal.reset();
    ended.exit_code = 1;
    recorder({launcher::supervisor_event::kind::exited, 1, 4243, 0, &ended, ""});
    // torchelastic's file (its "timestamp" in seconds) and a file with no time at all (its
    // modification time): one of an earlier attempt's is left out too
    test::write_file(paths.rank_error_file(2),
                     R"({"message": {"message": "RuntimeError: old", "extraInfo": )"
                     R"({"timestamp": ")" +
                         std::to_string((now - 60'000) / 1000) + "\"}}}");
    ended.rank = 2;
    recorder({launcher::supervisor_event::kind::exited, 2, 4244, 0, &ended, ""});
  }
  const auto errors = store::run_reader(paths.dir()).errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].rank == 1);
  CHECK(errors[0].message == "this start's error");
  // a file without a time is as old as its last write
  test::write_file(paths.rank_error_file(3), "plain text");
  CHECK(read_worker_error(paths.rank_error_file(3))->time_ms >= now - 5000);
}

TEST_CASE("only a rank that ended well by itself, in this attempt, is said to have left early",
          "[run_recorder]") {
  test::temp_dir tmp;
  const auto paths = fresh_run(tmp);
  store::node_writer db(paths.node_db("node-a"));
  launcher::run_recorder recorder(db, paths, "node-a", 0);
  const auto now = store::now_ms();
  const auto end = [&](int rank, std::int64_t started, std::int64_t at, int code, bool knock_on,
                       bool first) {
    launcher::rank_exit x;
    x.rank = rank;
    x.pid = 100 + rank;
    x.exit_code = code;
    x.started_ms = started;
    x.time_ms = at;
    x.knock_on = knock_on;
    x.first_failure = first;
    recorder({launcher::supervisor_event::kind::exited, rank, x.pid, 0, &x, ""});
  };
  // attempt 1: rank 2 ends well on the launcher's stop (a knock-on), rank 1 fails 5 s later
  end(2, now - 20'000, now - 10'000, 0, true, false);
  end(1, now - 20'000, now - 5'000, 1, false, true);
  CHECK_FALSE(recorder.ended_early_note());
  // attempt 1 had a rank end well by itself; attempt 2's failure is not its
  end(0, now - 20'000, now - 15'000, 0, false, false);
  end(1, now - 4'000, now, 1, false, true);
  CHECK_FALSE(recorder.ended_early_note());
  // attempt 2: rank 0 ends well by itself 3 s before rank 1 fails
  end(0, now - 4'000, now + 1'000, 0, false, false);
  end(1, now - 4'000, now + 4'000, 1, false, true);
  REQUIRE(recorder.ended_early_note());
  CHECK_THAT(*recorder.ended_early_note(),
             Catch::StartsWith("rank 0 had ended well (exit code 0) 3.0 s before"));
}
