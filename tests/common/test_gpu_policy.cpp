// Tests of the GPU environment policy (common/gpu_policy.hpp): its first rules.
#include <catch2/catch.hpp>

#include "common/gpu_policy.hpp"
#include "tests/support/expect_error.hpp"

using muster::decide_gpu_policy;
using muster::gpu_policy_input;

TEST_CASE("TP or CP without FSDP gets CUDA_DEVICE_MAX_CONNECTIONS=1 with its reason",
          "[gpu_policy]") {
  auto d = decide_gpu_policy({2, 1, "no_shard", false, {}});
  REQUIRE(d.size() == 1);
  CHECK(d[0].rule == "cuda-max-connections-tp-cp");
  CHECK(d[0].variable == "CUDA_DEVICE_MAX_CONNECTIONS");
  CHECK(d[0].value == "1");
  CHECK_THAT(d[0].reason, Catch::Contains("tensor = 2, context = 1 without FSDP sharding"));
  auto was = decide_gpu_policy({1, 2, "optim", false, {{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}}});
  REQUIRE(was.size() == 1);
  CHECK_THAT(was[0].reason, Catch::EndsWith("; was 8"));
  CHECK(decide_gpu_policy({1, 1, "no_shard", false, {}}).empty());
}

TEST_CASE("FSDP sharding unsets a CUDA_DEVICE_MAX_CONNECTIONS of 1 and keeps larger ones",
          "[gpu_policy]") {
  auto d = decide_gpu_policy({2, 1, "optim_grads_params", false,
                              {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}});
  REQUIRE(d.size() == 1);
  CHECK(d[0].rule == "cuda-max-connections-fsdp");
  CHECK_FALSE(d[0].value.has_value());
  std::map<std::string, std::string, std::less<>> env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  muster::apply_gpu_policy(d, env);
  CHECK(env.count("CUDA_DEVICE_MAX_CONNECTIONS") == 0);
  CHECK(decide_gpu_policy({2, 1, "optim_grads", false, {{"CUDA_DEVICE_MAX_CONNECTIONS", "32"}}})
            .empty());
}

TEST_CASE("NCCL user buffers with expandable segments are refused, naming both and the fix",
          "[gpu_policy]") {
  for (const char* variable : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    INFO(variable);
    auto message = muster::test::expect_error(muster::errc::config, [&] {
      decide_gpu_policy({1, 1, "optim_grads_params", true,
                         {{variable, "max_split_size_mb:512,expandable_segments:True"}}});
    });
    CHECK_THAT(message, Catch::Contains(std::string("comm.nccl_ub = true and ") + variable +
                                        "=max_split_size_mb:512,expandable_segments:True cannot "
                                        "be used together"));
    CHECK_THAT(message, Catch::Contains("remove expandable_segments:True"));
    CHECK_THAT(message, Catch::Contains("or set comm.nccl_ub = false"));
  }
  CHECK_NOTHROW(decide_gpu_policy({1, 1, "no_shard", true,
                                   {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"}}}));
  CHECK_NOTHROW(decide_gpu_policy({1, 1, "no_shard", false,
                                   {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}}}));
}
