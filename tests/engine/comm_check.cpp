// comm_check: run by test_comm under `muster run` as each rank of a job; checks every
// collective of engine/comm against what it must give (values encode the sending rank), prints
// "comm_check: rank R: all collectives correct" and exits 0, or names what was wrong and
// exits 1.
//   --stall-rank R   rank R sleeps instead of joining the all_gather (the others time out)
//   --timeout-ms N   the collectives' timeout (default 30000)
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "engine/comm/communicator.hpp"

using namespace muster::engine::comm;

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
  expect(torch::all(a1 == sum_1_to_n).item<bool>() && torch::all(between == sum_1_to_n).item<bool>(),
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
      expect(got[at][0].item<float>() == float(100 * p + r), "all_to_all rows from rank " + std::to_string(p));
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

}  // namespace

int main(int argc, char** argv) {
  int stall_rank = -1;
  long timeout_ms = 30000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--stall-rank") stall_rank = std::atoi(argv[i + 1]);
    else if (a == "--timeout-ms") timeout_ms = std::atol(argv[i + 1]);
  }
  try {
    world_options times;
    times.timeout = std::chrono::milliseconds(timeout_ms);
    auto world = make_world(times);
    check_all(*world, stall_rank);
    if (failures) return 1;
    std::printf("comm_check: rank %d: all collectives correct\n", world->rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_check: %s\n", e.what());
    return 1;
  }
}
