// run_recorder: what a rank's end puts in a real run store, from its real error file.
#include <catch2/catch.hpp>

#include "common/run_dir.hpp"
#include "common/run_reader.hpp"
#include "common/run_store.hpp"
#include "common/worker_error.hpp"
#include "launcher/run_recorder.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;

TEST_CASE("a rank's end records its error file, not one an earlier attempt left",
          "[run_recorder]") {
  test::temp_dir tmp;
  store::run_paths paths(tmp.path(), "job-20261128-100000-abcd");
  paths.create();
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
