// What the launcher makes of workers' heartbeat files: their age and line, the hang report
// naming every rank's last step and the ranks behind, and the console's progress line with
// its ETA.
#include <catch2/catch.hpp>

#include <utime.h>

#include <fstream>
#include <thread>

#include "launcher/heartbeat.hpp"
#include "launcher/progress_line.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::launcher;
using namespace std::chrono_literals;

TEST_CASE("read_heartbeat: nothing for a file never written, the age and line otherwise") {
  muster::test::temp_dir dir;
  const auto file = dir / "rank-0.heartbeat";
  CHECK_FALSE(read_heartbeat(file));
  std::ofstream(file) << "step=3 steps=10\n";
  auto fresh = read_heartbeat(file);
  REQUIRE(fresh);
  CHECK(fresh->progress.step == 3);
  CHECK(fresh->age_ms < 5000);
  utimbuf old{};
  old.actime = old.modtime = std::time(nullptr) - 60;
  REQUIRE(::utime(file.c_str(), &old) == 0);
  CHECK(read_heartbeat(file)->age_ms >= 59000);
  std::ofstream(file, std::ios::trunc);  // a worker that only touches its file
  auto touched = read_heartbeat(file);
  REQUIRE(touched);
  CHECK_FALSE(touched->progress.step);
}

TEST_CASE("a hang report names every rank's last beat and the ranks behind") {
  auto beat = [](std::int64_t age, std::optional<std::int64_t> step) {
    heartbeat b;
    b.age_ms = age;
    b.progress.step = step;
    return std::optional<heartbeat>(b);
  };
  CHECK(describe_heartbeats({{0, beat(5, 120)}, {1, beat(3012, 97)}, {2, std::nullopt}}) ==
        "rank 0: step 120, 5 ms ago, rank 1: step 97, 3012 ms ago, rank 2: never; behind: "
        "rank 1 (step 97 of 120)");
  CHECK(describe_heartbeats({{0, beat(5, std::nullopt)}, {1, beat(3012, std::nullopt)}}) ==
        "rank 0: 5 ms ago, rank 1: 3012 ms ago");
  CHECK(describe_heartbeats({{0, beat(5, 7)}, {1, beat(3012, 7)}}) ==
        "rank 0: step 7, 5 ms ago, rank 1: step 7, 3012 ms ago");
  // one step short is the skew of beats written at different moments, not a laggard
  CHECK(describe_heartbeats({{0, beat(5, 22)}, {1, beat(1048, 3)}, {2, beat(8, 23)}}) ==
        "rank 0: step 22, 5 ms ago, rank 1: step 3, 1048 ms ago, rank 2: step 23, 8 ms ago; "
        "behind: rank 1 (step 3 of 23)");
  // ranks hung at once: frozen a step apart, the one behind is the one the others wait on
  CHECK(hang_culprits({{0, beat(10135, 2)}, {1, beat(10137, 1)}, {2, beat(10130, 2)}}) ==
        std::vector<int>{1});
  CHECK(describe_hang_culprits({{0, beat(10135, 2)}, {1, beat(10137, 1)}, {3, beat(10137, 1)}}) ==
        "; waited on: rank 1, 3 (step 1 of 2)");
  CHECK(hang_culprits({{0, beat(10135, 2)}, {1, beat(10137, 2)}}).empty());  // no telling
  CHECK(hang_culprits({{0, beat(10135, 2)}, {1, beat(10137, std::nullopt)}}).empty());
  CHECK(hang_culprits({{0, beat(10135, 2)}, {1, std::nullopt}}).empty());
  CHECK(hang_culprits({{1, beat(10137, 1)}}).empty());
  CHECK(describe_hang_culprits({{1, beat(10137, 1)}}).empty());
}

TEST_CASE("the progress line: step of steps, loss, tokens/s and an ETA from the step rate") {
  progress_meter meter;
  const auto t0 = progress_meter::clock::now();
  heartbeat_progress p;
  CHECK_FALSE(meter.line(p, t0));  // no step yet: no line
  p.step = 100;
  p.steps = 1000;
  p.loss = 2.34121;
  p.tokens_per_s = 51234;
  CHECK(meter.line(p, t0) == "step 100/1000 | loss 2.3412 | 51.2k tok/s | ETA --");
  p.step = 110;  // 10 steps in 5 s: 890 left take 445 s
  CHECK(meter.line(p, t0 + 5s) == "step 110/1000 | loss 2.3412 | 51.2k tok/s | ETA 7m25s");
  p.step = 5;  // a restart from a checkpoint: the rate is measured again
  CHECK(meter.line(p, t0 + 6s) == "step 5/1000 | loss 2.3412 | 51.2k tok/s | ETA --");
  p.step = 6;  // one step in 4 s with 10^15 left: the ETA stops at a year
  p.steps = 1'000'000'000'000'000;
  CHECK(meter.line(p, t0 + 10s) ==
        "step 6/1000000000000000 | loss 2.3412 | 51.2k tok/s | ETA 8760h00m");
  heartbeat_progress bare;
  bare.step = 3;
  CHECK(meter.line(bare, t0 + 7s) == "step 3");
}

TEST_CASE("ETA and rate read as a person writes them") {
  CHECK(format_eta(45s) == "45s");
  CHECK(format_eta(725s) == "12m05s");
  CHECK(format_eta(3h + 7min + 59s) == "3h07m");
  CHECK(format_eta(-3s) == "0s");
  CHECK(format_rate(950) == "950");
  CHECK(format_rate(51234) == "51.2k");
  CHECK(format_rate(1.2e6) == "1.20M");
}
