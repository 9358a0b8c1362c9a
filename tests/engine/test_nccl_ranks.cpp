// The NCCL backend across every GPU of the machine (up to 8): one comm_check process a GPU, as
// muster-train's ranks are (RANK, LOCAL_RANK, WORLD_SIZE, a rendezvous store on loopback), each
// checking every collective and its *_into forms against what it must give. Skipped without a
// CUDA device, and with one ("SKIPPED: ..."): test_nccl_comm covers one GPU.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/support/free_port.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

TEST_CASE("the NCCL backend's collectives across every GPU of the machine", "[nccl][gpu]") {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  if (devices < 2) {
    WARN("SKIPPED: one CUDA device; the NCCL check across GPUs needs two or more");
    return;
  }
  const int ranks = std::min(devices, 8);
  muster::test::temp_dir logs;
  const auto port = std::to_string(muster::test::free_loopback_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    muster::test::env_change env;
    env.set = {{"RANK", std::to_string(r)},
               {"LOCAL_RANK", std::to_string(r)},
               {"WORLD_SIZE", std::to_string(ranks)},
               {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", port}};
    pids.push_back(muster::test::spawn_logged(
        {MUSTER_TEST_BIN_DIR "/comm_check", "--device", "cuda", "--timeout-ms", "60000"}, env,
        logs / ("rank-" + std::to_string(r) + ".log")));
  }
  for (int r = 0; r < ranks; ++r) {
    const auto result = muster::test::wait_process(pids[std::size_t(r)]);
    const auto log = muster::test::read_file(logs / ("rank-" + std::to_string(r) + ".log"));
    INFO("rank " << r << " of " << ranks << ":\n" << log);
    CHECK(result.exit_code == 0);
    CHECK_THAT(log, Catch::Contains("comm_check: rank " + std::to_string(r) +
                                    ": all collectives correct"));
  }
}
