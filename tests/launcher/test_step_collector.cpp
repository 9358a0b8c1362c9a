// Copying workers' step lines to the store: only complete lines, each once, per rank, and a
// file that starts over (a restart) read from its start.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/step_line.hpp"
#include "launcher/step_collector.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;

TEST_CASE("the collector stores each complete step line once, with its rank", "[steps]") {
  muster::test::temp_dir dir;
  std::vector<store::step_record> stored;
  launcher::step_collector steps(
      {4, 5}, [&](int rank) { return dir / ("rank-" + std::to_string(rank) + ".steps"); },
      [&](const std::vector<store::step_record>& batch) {
        stored.insert(stored.end(), batch.begin(), batch.end());
      });
  CHECK(steps.collect() == 0);  // no files yet
  std::ofstream four(dir / "rank-4.steps"), five(dir / "rank-5.steps");
  four << format_step_line({0, 0, 2.5, 64, 0.1, 0, 1}) << "step=1 loss=2.4";  // half a line
  four.flush();
  five << format_step_line({0, 0, 2.6, 64, 0.1, 0, 1});
  five.flush();
  CHECK(steps.collect() == 2);
  four << " tokens=64\n";
  four.flush();
  CHECK(steps.collect() == 1);
  CHECK(steps.collect() == 0);
  REQUIRE(stored.size() == 3);
  CHECK((stored[0].rank == 4 && stored[0].step == 0));
  CHECK((stored[1].rank == 5 && stored[1].loss == Approx(2.6)));
  CHECK((stored[2].rank == 4 && stored[2].step == 1 && stored[2].tokens == 64));
  four.close();
  std::ofstream(dir / "rank-4.steps", std::ios::trunc) << format_step_line({0, 0, 9.0, 1, 0, 0, 2});
  CHECK(steps.collect() == 1);  // a shorter file is a new one: read from its start
  CHECK(stored.back().loss == Approx(9.0));
}
