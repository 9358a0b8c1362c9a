// The engine refuses NCCL user buffers under expandable segments with the policy's message
// (the rule musterd applies), before PyTorch 2.11, and lets them be otherwise.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "engine/comm/nccl_ub_policy.hpp"

using muster::engine::comm::check_nccl_ub_policy;

TEST_CASE("NCCL user buffers are refused under expandable segments before PyTorch 2.11",
          "[nccl_ub_policy]") {
  const muster::env_vars expandable{{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}};
  try {
    check_nccl_ub_policy(expandable, "2.5.1+cu124");
    FAIL("user buffers were let through with expandable segments");
  } catch (const muster::error& e) {
    CHECK(e.category() == muster::errc::config);
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("comm.nccl_ub = true and "
                                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True cannot be "
                                     "used together before PyTorch 2.11"));
    CHECK_THAT(what, Catch::Contains("set comm.nccl_ub = false"));
  }
  CHECK_NOTHROW(check_nccl_ub_policy(expandable, "2.11.0+cu130"));
  CHECK_NOTHROW(check_nccl_ub_policy({}, "2.5.1"));
  CHECK_NOTHROW(
      check_nccl_ub_policy({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"}}, "2.5.1"));
}
