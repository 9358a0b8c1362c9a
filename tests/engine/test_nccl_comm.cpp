// The NCCL backend on one GPU (world 1, beside a Gloo world on a loopback store): every
// collective gives what it must, CPU tensors are staged through the device, and user buffers
// come back registered and usable. Without a CUDA device: "SKIPPED: no CUDA device".
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "engine/comm/communicator.hpp"
#include "engine/comm/nccl_communicator.hpp"
#include "tests/support/free_port.hpp"

namespace comm = muster::engine::comm;

namespace {

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace

TEST_CASE("the NCCL backend's collectives on one GPU", "[nccl][gpu]") {
  if (!have_device()) {
    WARN("SKIPPED: no CUDA device");
    return;
  }
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(muster::test::free_loopback_port()).c_str(), 1);
  comm::world_options times;
  times.timeout = std::chrono::milliseconds(20000);
  auto world = comm::make_world(times);
  INFO("NCCL " << comm::nccl_version());
  comm::nccl_options options;
  options.user_buffers = true;
  auto nccl = comm::make_nccl_group(*world, "nccl-world", {0}, options);
  REQUIRE(nccl->size() == 1);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);

  auto x = torch::arange(10, cuda.dtype(torch::kFloat32));
  nccl->all_reduce_sum(x);
  CHECK(torch::equal(x.cpu(), torch::arange(10, torch::kFloat32)));
  auto b = torch::randn({7}, cuda).to(torch::kBFloat16);
  const auto b0 = b.clone();
  nccl->all_reduce_sum_async(b)->wait();
  CHECK(torch::equal(b, b0));
  CHECK(torch::equal(nccl->all_gather(x).cpu(), x.cpu()));
  CHECK(torch::equal(nccl->reduce_scatter_sum(x).cpu(), x.cpu()));
  auto rows = torch::randn({5, 3}, cuda);
  CHECK(torch::equal(nccl->all_to_all(rows, {5}, {5}).cpu(), rows.cpu()));
  nccl->broadcast(x, 0);
  nccl->barrier();
  // CPU tensors are staged through the device and come back on the CPU
  const auto counts = comm::exchange_counts(*nccl, {42});
  REQUIRE(counts.size() == 1);
  CHECK(counts[0] == 42);
  // a user buffer is a registered device tensor collectives can use
  auto ub = nccl->collective_buffer(1 << 20, cuda.dtype(torch::kFloat32));
  CHECK(ub.is_cuda());
  ub.fill_(2.0f);
  nccl->all_reduce_sum(ub);
  CHECK(ub.sum().item<double>() == 2.0 * (1 << 20));
  CHECK(nccl->sequence() == 9);  // the collectives above, counts and user buffer included
}
