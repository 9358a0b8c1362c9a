// The engine's collectives over Gloo between real rank processes started by `muster run`
// (comm_check is each rank), and a rank that never joins: the others time out with a line that
// names the op, its sequence number, its size, the group and the rank that did not arrive.
#include <catch2/catch.hpp>

#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kCheck = std::string(MUSTER_TEST_BIN_DIR) + "/comm_check";

muster::test::process_result run_ranks(const muster::test::temp_dir& runs, int nproc,
                                       std::vector<std::string> args) {
  std::vector<std::string> argv = {kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                   "launch.nproc=" + std::to_string(nproc), "launch.tee=all",
                                   "launch.kill_grace=2", "--", kCheck};
  argv.insert(argv.end(), args.begin(), args.end());
  return muster::test::run_process(argv);
}

}  // namespace

TEST_CASE("3 ranks: every collective gives what it must", "[comm]") {
  muster::test::temp_dir runs;
  auto r = run_ranks(runs, 3, {});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  for (int rank = 0; rank < 3; ++rank)
    CHECK_THAT(r.out, Catch::Contains("comm_check: rank " + std::to_string(rank) +
                                      ": all collectives correct"));
}

TEST_CASE("a rank that never joins: the others time out naming it", "[comm]") {
  muster::test::temp_dir runs;
  auto r = run_ranks(runs, 2, {"--stall-rank", "1", "--timeout-ms", "1500"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("[rank 0/2 group world] all_gather seq=5 bytes=12 timed out "
                                    "after 1500 ms; not arrived: rank 1 (at seq 4)"));
}

// (6 s: long enough for rank 0, starting beside the others, to serve the store first)
TEST_CASE("a rank stuck before it joins: the others' group times out naming it", "[comm]") {
  muster::test::temp_dir runs;
  auto r = run_ranks(runs, 3, {"--late-rank", "2", "--connect-timeout-ms", "6000"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("group world] connect timed out after 6000 ms; not arrived: "
                                    "rank 2 (never joined the group) ("));
}
