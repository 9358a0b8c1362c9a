// A bounded-time fuzzer for musterd's request parsing and handling (the router and the store
// work it hands out), run by CTest: valid requests of every kind, mutated byte- and token-wise,
// go through route() and, when it hands out work, through that work on a real node store. Every
// reply must be one line of JSON with the protocol's fields; a crash, a hang, an exception out
// of the router or (in the sanitizer build) a memory error fails it.
//
// MUSTER_FUZZ_SECONDS sets the time (default 10); MUSTER_TEST_SEED replays a failing seed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "daemon/node_store.hpp"
#include "daemon/router.hpp"
#include "tests/support/seed.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::daemon;
using nlohmann::json;

namespace {

const std::vector<std::string> kSeeds = {
    R"({"version": 1, "request": "env", "job": {"id": "77", "step": "0", "tp": 2, "cp": 1, "ep": 4, "gpus": 8, "sharding": "optim_grads_params", "torch_version": "2.5.1", "memory_tight": true, "dump_dir": "/runs/r", "features": {"nccl_ub": true, "fsdp_double_buffer": false, "tp_comm_overlap": true, "ep_comm_overlap": true, "expandable_segments": true, "cuda_graphs": true}}, "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}})",
    R"({"version": 1, "request": "env", "job": {"tp": 2}, "env": {"NCCL_SOCKET_IFNAME": "eth0"}})",
    R"({"version": 1, "request": "record", "event": "start", "job": {"id": "77", "step": "0"}, "run_dir": "/runs/r", "num_ranks": 8})",
    R"({"version": 1, "request": "record", "event": "end", "job": {"id": "77", "step": "0"}, "state": "failed", "exit_code": 3, "message": "rank 2"})",
    R"({"version": 1, "request": "job", "job": {"id": "77"}})",
    R"({"version": 1, "request": "preflight", "job": {"id": "77", "step": "1"}, "gpus": [0, 1], "num_gpus": 2, "run_dir": "/tmp"})",
    R"({"version": 1, "request": "status"})",
};

// Fragments a JSON-aware mutation splices in: the values and shapes parsers trip on.
const std::vector<std::string> kTokens = {"{",
                                          "}",
                                          "[",
                                          "]",
                                          ",",
                                          ":",
                                          "\"",
                                          "\\",
                                          "null",
                                          "true",
                                          "-1",
                                          "0",
                                          "1e999",
                                          "-0.0",
                                          "4294967296",
                                          "\"\\u0000\"",
                                          "[[[[",
                                          "{}",
                                          "[]",
                                          "\"id\"",
                                          "\"\\ud800\"",
                                          "\xff\xfe",
                                          "\"a b\"",
                                          "9223372036854775808",
                                          "\"job\":{\"id\":\"x\"}",
                                          "\"gpus\":[99999]",
                                          "\n",
                                          "\"version\":1"};

std::string mutate(std::string line, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n ? static_cast<std::size_t>(rng() % n) : 0; };
  const int edits = 1 + static_cast<int>(pick(6));
  for (int e = 0; e < edits; ++e) {
    const auto at = pick(line.size() + 1);
    switch (pick(6)) {
      case 0:
        line.insert(line.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(rng()));
        break;
      case 1:
        if (at < line.size()) line.erase(at, 1 + pick(8));
        break;
      case 2:
        if (at < line.size()) line[at] = static_cast<char>(rng());
        break;
      case 3:
        line.insert(at, kTokens[pick(kTokens.size())]);
        break;
      case 4: {  // repeat a piece of the line
        const auto from = pick(line.size());
        line.insert(at, line.substr(from, 1 + pick(32)));
        break;
      }
      default:  // splice the tail of another request
        const auto& other = kSeeds[pick(kSeeds.size())];
        line = line.substr(0, at) + other.substr(pick(other.size()));
        break;
    }
  }
  return line;
}

}  // namespace

TEST_CASE("mutated requests of every kind get one well-formed reply each, for a bounded time",
          "[fuzz]") {
  const auto seed = muster::test::test_seed();
  INFO("MUSTER_TEST_SEED=" << seed);
  std::mt19937_64 rng(seed);
  const char* seconds_text = std::getenv("MUSTER_FUZZ_SECONDS");
  const auto budget = std::chrono::duration<double>(seconds_text ? std::atof(seconds_text) : 10.0);

  muster::test::temp_dir dir("fuzz");
  muster::test::write_file(dir / "gpus.json",
                           R"({"devices": [{"index": 0, "name": "H100", "memory_total_mib": 80,
                               "processes": [{"pid": 1, "used_mib": 1}]}]})");
  muster::test::write_file(dir / "kmsg", "3,1,1,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1\n");
  node_context c;
  c.node = {8, 9, {"eth0"}, {"mlx5_0"}};
  c.slurm.squeue = "";  // no Slurm: owners come from the first record
  c.preflight = {(dir / "gpus.json").string(), (dir / "kmsg").string(), "/dev/shm"};
  const router r(c);
  node_store store(dir / "musterd.db", 90);

  const auto start = std::chrono::steady_clock::now();
  long lines = 0, ok = 0;
  while (std::chrono::steady_clock::now() - start < budget) {
    const auto& seed_line = kSeeds[static_cast<std::size_t>(rng() % kSeeds.size())];
    const auto line = rng() % 8 == 0 ? seed_line : mutate(seed_line, rng);
    const uid_t uid = rng() % 3 == 0 ? 0 : 1000 + static_cast<uid_t>(rng() % 2);
    auto routed = r.route(line, {42, uid, uid});
    const auto reply_text = routed.work ? routed.work(store) : routed.reply;
    ++lines;
    const auto reply = json::parse(reply_text, nullptr, false);
    if (reply.is_object() && reply_text.find('\n') == std::string::npos &&
        reply.value("version", 0) == 1 && reply.contains("ok") && reply["ok"].is_boolean() &&
        (reply["ok"] == true || (reply.contains("error") && reply["error"].contains("code") &&
                                 reply["error"]["code"] != "internal"))) {
      ok += reply["ok"] == true;
      continue;
    }
    INFO("request: " << line);
    INFO("reply: " << reply_text);
    FAIL("a reply that is not one well-formed line (or an internal error)");
  }
  WARN(lines << " requests in " << budget.count() << " s, " << ok << " answered ok");
  CHECK(lines > 1000);
  CHECK(ok > 0);
}
