// comm_check: run by test_comm under `muster run` as each rank of a job; checks every
// collective of engine/comm against what it must give (values encode the sending rank), and
// FSDP units sharded over the ranks gathering into and reducing from kept buffers, prints
// "comm_check: rank R: all collectives correct" and exits 0, or names what was wrong and
// exits 1.
//   --stall-rank R   rank R sleeps instead of joining the all_gather (the others time out)
//   --timeout-ms N   the collectives' timeout (default 30000)
//   --late-rank R    rank R sleeps 60 s before it joins the world (a rank stuck at startup)
//   --connect-timeout-ms N   how long the world waits for every rank to join (default 30000)
//   --device cuda    the world on NCCL, each rank on GPU LOCAL_RANK (as muster-train's
//                    train.device = "cuda"; test_nccl_ranks): the collectives and their *_into
//                    forms, with CPU tensors staged through the device (the FSDP units' check
//                    stays on the CPU: test_gpu_train runs units on a GPU)
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/comm/device_world.hpp"
#include "engine/parallel/flat_unit.hpp"
#include "engine/train/device_choice.hpp"

using namespace muster::engine::comm;
namespace parallel = muster::engine::parallel;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "comm_check: wrong: %s\n", what.c_str());
  ++failures;
}

void check_all(communicator& c, int stall_rank) {
  const int r = c.rank(), n = c.size();
  const double sum_1_to_n = n * (n + 1) / 2.0;
  auto t = torch::full({1000}, double(r + 1), torch::kFloat32);
  c.all_reduce_sum(t);
  expect(torch::all(t == sum_1_to_n).item<bool>(), "all_reduce fp32");
  auto b = torch::full({8}, double(r + 1), torch::kBFloat16);
  c.all_reduce_sum(b);
  expect(b.scalar_type() == torch::kBFloat16 && torch::all(b == sum_1_to_n).item<bool>(),
         "all_reduce bf16");
  // Two all_reduces left running while a blocking collective goes on, waited for out of order;
  // bf16 comes back as bf16.
  auto a1 = torch::full({100000}, double(r + 1), torch::kFloat32);
  auto a2 = torch::full({16}, double(2 * (r + 1)), torch::kBFloat16);
  auto first = c.all_reduce_sum_async(a1);
  auto second = c.all_reduce_sum_async(a2);
  auto between = torch::full({4}, double(r + 1), torch::kFloat32);
  c.all_reduce_sum(between);
  second->wait();
  first->wait();
  first->wait();  // a second wait is a no-op
  expect(
      torch::all(a1 == sum_1_to_n).item<bool>() && torch::all(between == sum_1_to_n).item<bool>(),
      "all_reduce_sum_async fp32");
  expect(a2.scalar_type() == torch::kBFloat16 && torch::all(a2 == 2 * sum_1_to_n).item<bool>(),
         "all_reduce_sum_async bf16");
  if (r == stall_rank) std::this_thread::sleep_for(std::chrono::seconds(60));
  auto g = c.all_gather(torch::full({3}, double(r), torch::kFloat32));
  expect(g.numel() == 3 * n && g[3 * (n - 1)].item<float>() == float(n - 1), "all_gather");
  // reduce_scatter: rank r holds full[i] = i * (r + 1); the sum is i * sum_1_to_n
  auto full = torch::arange(4 * n, torch::kFloat32) * double(r + 1);
  auto part = c.reduce_scatter_sum(full);
  auto want = torch::arange(4 * r, 4 * r + 4, torch::kFloat32) * sum_1_to_n;
  expect(torch::equal(part, want), "reduce_scatter_sum");
  // all_to_all, uneven: rank r sends r + 1 rows to every rank, each row = 100 * r + peer
  std::vector<std::int64_t> send(std::size_t(n), r + 1);
  auto recv = exchange_counts(c, send);
  for (int p = 0; p < n; ++p) expect(recv[std::size_t(p)] == p + 1, "exchange_counts");
  std::vector<torch::Tensor> rows;
  for (int p = 0; p < n; ++p) rows.push_back(torch::full({r + 1, 2}, double(100 * r + p)));
  auto got = c.all_to_all(torch::cat(rows), send, recv);
  std::int64_t at = 0;
  for (int p = 0; p < n; ++p)
    for (int k = 0; k <= p; ++k, ++at)
      expect(got[at][0].item<float>() == float(100 * p + r),
             "all_to_all rows from rank " + std::to_string(p));
  auto x = torch::full({5}, double(r == 1 ? 42 : -1), torch::kFloat32);
  c.broadcast(x, 1 % n);
  expect(torch::all(x == (n > 1 ? 42.0 : -1.0)).item<bool>(), "broadcast");
  c.barrier();
  if (n >= 2 && r < 2) {  // a group of the first two ranks
    auto pair = make_group(c, "pair", {0, 1});
    auto y = torch::full({2}, double(r + 10), torch::kFloat32);
    pair->all_reduce_sum(y);
    expect(torch::all(y == 21.0).item<bool>() && pair->size() == 2, "group all_reduce");
  }
}

// The *_into forms: in place into a buffer of the wire dtype, through a copy into another
// dtype, in place with the shard a view of the output (FSDP's after_update), and a refusal of
// an output of the wrong size (before anything is sent: the group stays usable).
void check_into(communicator& c) {
  const int r = c.rank(), n = c.size();
  const double sum_1_to_n = n * (n + 1) / 2.0;
  const auto ranks = torch::arange(n, torch::kFloat32);
  auto out = c.collective_buffer(2 * n, torch::TensorOptions(torch::kFloat32));  // NCCL: on its GPU
  c.all_gather_into(torch::full({2}, double(r), torch::kFloat32), out);
  expect(torch::equal(out.cpu(), ranks.repeat_interleave(2)), "all_gather_into fp32");
  auto out16 = torch::empty({2 * n}, torch::kBFloat16);
  c.all_gather_into(torch::full({2}, double(r), torch::kFloat32), out16);
  expect(torch::equal(out16.to(torch::kFloat32), ranks.repeat_interleave(2)),
         "all_gather_into a bf16 output");
  auto whole = torch::zeros({3 * n}, torch::kFloat32);
  whole.narrow(0, 3 * r, 3).fill_(r + 1);
  c.all_gather_into(whole.narrow(0, 3 * r, 3), whole);
  expect(torch::equal(whole, (ranks + 1).repeat_interleave(3)), "all_gather_into in place");
  const auto full = torch::arange(4 * n, torch::kFloat32) * double(r + 1);
  const auto want = torch::arange(4 * r, 4 * r + 4, torch::kFloat32) * sum_1_to_n;
  auto part = torch::empty({4}, torch::kFloat32);
  c.reduce_scatter_sum_into(full, part);
  expect(torch::equal(part, want), "reduce_scatter_sum_into fp32");
  auto part16 = torch::empty({4}, torch::kBFloat16);
  c.reduce_scatter_sum_into(full.to(torch::kBFloat16), part16);
  expect(torch::equal(part16.to(torch::kFloat32), want), "reduce_scatter_sum_into bf16");
  // left running while another collective goes on, then finished (FSDP's overlapped reduction)
  auto later = torch::empty({4}, torch::kFloat32);
  auto running = c.reduce_scatter_sum_into_async(full, later);
  auto meanwhile = torch::ones({2});
  c.all_reduce_sum(meanwhile);
  running->wait();
  expect(torch::equal(later, want) && torch::equal(meanwhile, torch::full({2}, double(n))),
         "reduce_scatter_sum_into_async around an all_reduce");
  std::string refusal;
  try {
    auto wrong = torch::empty({3}, torch::kFloat32);
    c.reduce_scatter_sum_into(full, wrong);
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  expect(refusal.find("reduce_scatter into a tensor of 3 elements; it needs 4 contiguous") !=
             std::string::npos,
         "reduce_scatter_sum_into of the wrong size refused: '" + refusal + "'");
}

// FSDP units sharded over the group (optim_grads_params): a gather lands in a kept buffer and
// gives every rank the whole values; the units share one buffer when they take turns and need
// two at once; a larger unit's gather replaces the kept block rather than adding one; a
// prefetched gather lands while another unit gathers, and one never used is released; the
// gradients are summed over the ranks into each rank's shard,
// in fp32 and through bf16 on the wire, and every buffer comes back.
void check_units(const std::shared_ptr<communicator>& c) {
  const int r = c->rank(), n = c->size();
  const double sum_1_to_n = n * (n + 1) / 2.0;
  auto buffers = std::make_shared<parallel::collective_buffers>(c, /*keep_always=*/true);
  torch::manual_seed(7);  // the same values on every rank
  auto w1 = torch::randn({5, 7}).requires_grad_(), w2 = torch::randn({5, 7}).requires_grad_();
  const auto v1 = w1.detach().clone(), v2 = w2.detach().clone();
  parallel::unit_options o;
  o.strategy = parallel::sharding::optim_grads_params;
  o.group = c;
  o.buffers = buffers;
  o.name = "a";
  parallel::flat_unit a(o, {{"a.weight", w1}});
  o.name = "b";
  o.reduce_dtype = torch::kBFloat16;
  parallel::flat_unit b(o, {{"b.weight", w2}});
  for (int round = 0; round < 3; ++round) {
    a.gather();
    expect(w1.detach().equal(v1), "unit a gathered");
    a.release();
    b.gather();
    expect(w2.detach().equal(v2), "unit b gathered");
    b.release();
  }
  const auto gathered_bytes = [n](const parallel::flat_unit& u) {
    return u.shard_numel() * n * std::int64_t(sizeof(float));
  };
  expect(buffers->made() == 1 && buffers->bytes() == gathered_bytes(a),
         "units taking turns share one buffer, made " + std::to_string(buffers->made()) + " of " +
             std::to_string(buffers->bytes()) + " B");
  // a larger unit: the kept block is too small, so it goes and a larger one is made, which the
  // smaller units then share
  auto w3 = torch::randn({5, 70}).requires_grad_();
  const auto v3 = w3.detach().clone();
  o.name = "big";
  parallel::flat_unit big(o, {{"big.weight", w3}});
  big.gather();
  expect(w3.detach().equal(v3), "the larger unit gathered");
  big.release();
  expect(buffers->made() == 2 && buffers->bytes() == gathered_bytes(big),
         "the larger unit's block replaced the smaller one: made " +
             std::to_string(buffers->made()) + ", " + std::to_string(buffers->bytes()) + " B kept");
  a.gather();
  b.gather();
  expect(buffers->made() == 3 && buffers->bytes() == gathered_bytes(big) + gathered_bytes(b) &&
             w1.detach().equal(v1) && w2.detach().equal(v2),
         "two units gathered at once: one in the larger block, one in a new one");
  for (auto* u : {&a, &b}) u->begin_backward();
  ((w1 + w2) * double(r + 1)).sum().backward();
  for (auto* u : {&a, &b}) {
    u->end_backward();
    u->release();
    // every element's gradient summed over the ranks; 35 elements padded to a multiple of n
    auto want = torch::full({u->shard_numel()}, sum_1_to_n, torch::kFloat32);
    const auto first = r * u->shard_numel();
    if (first + u->shard_numel() > 35)
      want.narrow(0, std::max<std::int64_t>(0, 35 - first), first + u->shard_numel() - 35).zero_();
    expect(torch::equal(u->shard_grad(), want), "unit " + u->name() + "'s reduced gradient");
  }
  // prefetch: a's gather left running while b gathers, then waited for; one never used
  a.prefetch();
  b.gather();
  a.gather();
  expect(w1.detach().equal(v1) && w2.detach().equal(v2),
         "a prefetched unit gathered while another gathered");
  a.release();
  b.release();
  big.prefetch();
  big.release();
  expect(!big.gathered(), "a prefetch never used is released");
  expect(buffers->in_use() == 0,
         "every buffer given back, " + std::to_string(buffers->in_use()) + " still taken");
}

}  // namespace

int main(int argc, char** argv) {
  int stall_rank = -1, late_rank = -1;
  long timeout_ms = 30000, connect_timeout_ms = 30000;
  std::string device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--stall-rank")
      stall_rank = std::atoi(argv[i + 1]);
    else if (a == "--timeout-ms")
      timeout_ms = std::atol(argv[i + 1]);
    else if (a == "--late-rank")
      late_rank = std::atoi(argv[i + 1]);
    else if (a == "--connect-timeout-ms")
      connect_timeout_ms = std::atol(argv[i + 1]);
    else if (a == "--device")
      device = argv[i + 1];
  }
  try {
    world_options times;
    times.timeout = std::chrono::milliseconds(timeout_ms);
    times.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
    if (late_rank >= 0 && std::getenv("RANK") && std::atoi(std::getenv("RANK")) == late_rank)
      std::this_thread::sleep_for(std::chrono::seconds(60));
    muster::train_section train;
    train.device = device;
    auto world = make_device_world(muster::engine::train::training_device(train), times,
                                   /*nccl_ub=*/false);
    check_all(*world, stall_rank);
    check_into(*world);
    if (device == "cpu") check_units(world);
    if (failures) return 1;
    std::printf("comm_check: rank %d: all collectives correct\n", world->rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_check: %s\n", e.what());
    return 1;
  }
}
