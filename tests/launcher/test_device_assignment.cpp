// Tests of GPU and CPU shares per local rank (launcher/device_assignment.hpp).
#include <catch2/catch.hpp>

#include "launcher/device_assignment.hpp"
#include "tests/support/expect_error.hpp"

using muster::launcher::assign_gpus;
using muster::launcher::split_cpus;
using visible_list = std::optional<std::vector<std::string>>;

TEST_CASE("each local rank gets the next visible GPU, Slurm's list first", "[device_assignment]") {
  auto from_nodes = assign_gpus(4, std::nullopt, 8);
  CHECK(from_nodes == std::vector<std::optional<std::string>>{"0", "1", "2", "3"});
  // Slurm set CUDA_VISIBLE_DEVICES=4,5 for this task: ranks take those, not 0 and 1.
  auto from_slurm = assign_gpus(2, visible_list{{"4", "5"}}, 8);
  CHECK(from_slurm == std::vector<std::optional<std::string>>{"4", "5"});
  auto uuids = assign_gpus(1, visible_list{{"GPU-8f2a", "GPU-11c3"}}, 2);
  CHECK(uuids.front() == "GPU-8f2a");
}

TEST_CASE("without GPUs CUDA_VISIBLE_DEVICES is left alone", "[device_assignment]") {
  CHECK(assign_gpus(2, std::nullopt, 0) == std::vector<std::optional<std::string>>(2));
  CHECK(assign_gpus(2, visible_list{std::vector<std::string>{}}, 4) ==
        std::vector<std::optional<std::string>>(2));
}

TEST_CASE("more ranks than GPUs is refused with the number that works", "[device_assignment]") {
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [] { assign_gpus(8, std::nullopt, 4); }),
             Catch::Contains("launch.nproc = 8 but this machine has 4 GPU(s) (/dev/nvidia*); use "
                             "launch.nproc = 4 or fewer"));
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [] { assign_gpus(2, visible_list{{"3"}}, 8); }),
             Catch::Contains("launch.nproc = 2 but CUDA_VISIBLE_DEVICES=3 shows 1 GPU(s)"));
}

TEST_CASE("CPUs are split into contiguous shares, the first ones larger", "[device_assignment]") {
  auto shares = split_cpus({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4);
  CHECK(shares == std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}});
  auto few = split_cpus({2, 3}, 4);  // fewer CPUs than ranks: everyone shares them
  for (const auto& share : few) CHECK(share == std::vector<int>{2, 3});
}
