// hostlist_bench: how fast common/hostlist expands and compresses 1,000,000 hosts.
//
// Two shapes of node list: one long range (the common case of a large job) and a fragmented
// list (every third node missing: 500,000 ranges in one bracket, the worst case for both
// directions), plus a two-bracket rack-by-node list. For each: expand to a vector of strings,
// stream with for_each_host (no per-host allocation), and compress the hosts back. Each is the
// best of kRuns runs; prints milliseconds and hosts per second. Exits 1 if a round trip fails.
// Not here: the process-level comparison with scontrol (bench/compare_hostnames_scontrol.sh).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/hostlist.hpp"

namespace {

constexpr int kRuns = 5;
constexpr std::size_t kHosts = 1'000'000;

// Best wall time of kRuns calls of fn, in milliseconds.
template <class Fn>
double best_ms(Fn&& fn) {
  double best = 1e300;
  for (int run = 0; run < kRuns; ++run) {
    auto start = std::chrono::steady_clock::now();
    fn();
    auto end = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(end - start).count());
  }
  return best;
}

void report(const std::string& shape, const char* op, double ms, std::size_t hosts) {
  fmt::print("  {:<12} {:<9} {:>9.1f} ms {:>8.1f} M hosts/s\n", shape, op, ms,
             static_cast<double>(hosts) / ms / 1e3);
}

// Benchmarks one node list; returns false if compress(expand(list)) does not expand back.
bool bench_list(const std::string& shape, const std::string& list) {
  std::vector<std::string> hosts = muster::expand_hostlist(list);
  double expand_ms = best_ms([&] { hosts = muster::expand_hostlist(list); });
  std::size_t bytes = 0;
  double stream_ms = best_ms([&] {
    bytes = 0;
    muster::for_each_host(list, [&bytes](std::string_view h) { bytes += h.size() + 1; });
  });
  std::string compressed;
  double compress_ms = best_ms([&] { compressed = muster::compress_hostlist(hosts); });
  report(shape, "expand", expand_ms, hosts.size());
  report(shape, "stream", stream_ms, hosts.size());
  report(shape, "compress", compress_ms, hosts.size());
  fmt::print("  {:<12} {} hosts, list {} bytes, output {} bytes\n", "", hosts.size(), list.size(),
             bytes);
  return muster::expand_hostlist(compressed) == hosts;
}

std::string fragmented_list() {
  std::vector<std::string> hosts;
  hosts.reserve(kHosts);
  for (std::size_t i = 1; hosts.size() < kHosts; ++i)
    if (i % 3 != 0) hosts.push_back(fmt::format("n{:07}", i));
  return muster::compress_hostlist(hosts);
}

}  // namespace

int main() {
  fmt::print("hostlist_bench: expand / stream / compress {} hosts, best of {} runs\n", kHosts,
             kRuns);
  bool ok = bench_list("one range", "node[0000001-1000000]");
  ok = bench_list("racks", "rack[001-100]-gpu[00001-10000]") && ok;
  ok = bench_list("fragmented", fragmented_list()) && ok;
  if (!ok) std::fprintf(stderr, "hostlist_bench: a round trip failed\n");
  return ok ? 0 : 1;
}
