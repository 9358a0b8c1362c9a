// The step profiler: its summary tables from events, and a real profile of torch ops over a
// range of steps (files written, the busiest op named, nothing outside the range).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <torch/torch.h>

#include "engine/train/step_profiler.hpp"
#include "tests/support/profile_text.hpp"
#include "tests/support/temp_dir.hpp"

using muster::engine::train::profile_event;
using muster::engine::train::profile_summary;
using muster::engine::train::step_profiler;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("the profile summary lists GPU activities, then CPU ops, busiest first", "[profiler]") {
  const std::vector<profile_event> events{{"aten::mm", false, 300},   {"aten::add", false, 50},
                                          {"aten::mm", false, 100},   {"gemm_kernel", true, 250},
                                          {"copy_kernel", true, 500}, {"aten::relu", false, 10}};
  const auto text = profile_summary(events, "profile of step 3 on rank 1", 1000.0, 2);
  INFO(text);
  CHECK_THAT(text, Catch::StartsWith("profile of step 3 on rank 1: 1000.0 ms of wall time\n"));
  const auto gpu = text.find("GPU kernels, copies and fills by total time (0.8 ms in all)");
  const auto cpu = text.find("CPU ops by total time");
  REQUIRE(gpu != std::string::npos);
  REQUIRE(cpu != std::string::npos);
  CHECK(gpu < cpu);
  CHECK(text.find("copy_kernel") < text.find("gemm_kernel"));  // busiest first
  // aten::mm: 2 calls, 0.4 ms, 0.04% of the second of wall time, 200 us each
  CHECK_THAT(text, Catch::Contains("         2       0.400    0.0%      200.0  aten::mm"));
  CHECK_THAT(text, Catch::Contains("aten::add"));
  CHECK_THAT(text, !Catch::Contains("aten::relu"));  // past the 2 rows asked for
}

TEST_CASE("the profile summary says how busy the GPU was and what bounds the steps", "[profiler]") {
  // two streams: [100, 300) and [200, 400) overlap, [600, 650) alone: 350 us busy
  const std::vector<profile_event> overlapping{{"aten::mm", false, 900, 0},
                                               {"gemm_kernel", true, 200, 100},
                                               {"nccl_kernel", true, 200, 200},
                                               {"copy_kernel", true, 50, 600},
                                               {"fill_kernel", true, 20, 250}};  // inside
  auto text = profile_summary(overlapping, "profile of step 3 on rank 0", 1.0);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("\nGPU busy 0.3 ms of the 1.0 ms (35%): the GPU waits for the "
                                   "host most of the time: the steps are bound by the host"));
  text = profile_summary(overlapping, "profile of step 3 on rank 0", 0.5);
  CHECK_THAT(text, Catch::Contains("(70%): the GPU waits for the host part of the time"));
  text = profile_summary(overlapping, "profile of step 3 on rank 0", 0.36);
  CHECK_THAT(text, Catch::Contains("(97%): the steps are bound by the GPU's work"));
  // no GPU activities (a CPU run): no such line
  text = profile_summary({{"aten::mm", false, 900, 0}}, "profile of step 3 on rank 0", 1.0);
  CHECK_THAT(text, !Catch::Contains("GPU busy"));
}

TEST_CASE("the step profiler records only its steps and writes the summary", "[profiler]") {
  muster::test::temp_dir dir;
  const auto folder = dir.path() / "profile";
  step_profiler profile(2, 3, folder, 4, /*cuda=*/false);
  auto a = torch::randn({128, 128});
  for (int step = 1; step <= 4; ++step) {
    profile.before_step(step);
    auto b = a.mm(a).relu();
    const auto said = profile.after_step(step);
    if (step != 3) {
      CHECK(said.empty());
      if (step < 3) CHECK_FALSE(std::filesystem::exists(folder / "rank-4.txt"));
      continue;
    }
    INFO(said);
    CHECK_THAT(said, Catch::StartsWith("profile of steps 2..3 on rank 4: "));
    CHECK_THAT(said, Catch::Contains("aten::mm"));
    CHECK_THAT(said, Catch::Contains("profile written to " + (folder / "rank-4.txt").string()));
    const bool trace = std::filesystem::exists(folder / "rank-4.json");
    CHECK_THAT(said, Catch::Contains(trace ? "Chrome trace"
                                           : "no Chrome trace: this "
                                             "muster-train's LibTorch has no "
                                             "Kineto"));
    const auto text = read(folder / "rank-4.txt");
    CHECK_THAT(text, Catch::Contains("aten::mm"));
    CHECK(muster::test::profiled_calls(text, "aten::mm") == 2);  // two steps of one product
  }
}

TEST_CASE("a profile that cannot be written is reported, and the run goes on", "[profiler]") {
  muster::test::temp_dir dir;
  std::ofstream(dir.path() / "file") << "x";
  step_profiler profile(1, 0, dir.path() / "file" / "profile", 0, false);
  profile.before_step(1);
  auto b = torch::ones({4}).sum();
  const auto said = profile.after_step(1);
  CHECK_THAT(said, Catch::StartsWith("profile of step 1 on rank 0"));
  CHECK_THAT(said, Catch::Contains("profile not written: cannot write " +
                                   (dir.path() / "file" / "profile" / "rank-0.txt").string()));
}

TEST_CASE("a run resumed inside the range, or ended before its last step, profiles what it ran",
          "[profiler]") {
  muster::test::temp_dir dir;
  auto a = torch::randn({32, 32});
  {  // resumed at step 3 of a 2..4 range: steps 3 and 4
    step_profiler profile(2, 4, dir.path() / "resumed", 0, false);
    std::string said;
    for (int step = 3; step <= 5; ++step) {
      profile.before_step(step);
      auto b = a.mm(a);
      if (auto s = profile.after_step(step); !s.empty()) said = s;
    }
    CHECK(profile.finish(5).empty());  // already written
    CHECK_THAT(said, Catch::StartsWith("profile of steps 3..4 on rank 0: "));
  }
  {  // a 2..6 range in a run of 3 steps: steps 2 and 3, said so
    step_profiler profile(2, 6, dir.path() / "short", 1, false);
    for (int step = 1; step <= 3; ++step) {
      profile.before_step(step);
      auto b = a.mm(a);
      CHECK(profile.after_step(step).empty());
    }
    const auto said = profile.finish(3);
    CHECK_THAT(
        said, Catch::StartsWith("profile of steps 2..3 (the run ended before step 6) on rank 1: "));
    CHECK(muster::test::profiled_calls(said, "aten::mm") == 2);
    CHECK(std::filesystem::exists(dir.path() / "short" / "rank-1.txt"));
  }
}
