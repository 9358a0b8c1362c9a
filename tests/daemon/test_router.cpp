// Tests of musterd's router (daemon/router.hpp): request lines in, reply lines out, no sockets.
// The env request on a described GPU node, and every kind of bad request.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "daemon/protocol.hpp"
#include "daemon/router.hpp"

using muster::daemon::router;
using nlohmann::json;

namespace {

// An H100 node with two NICs and one HCA.
router gpu_node() {
  muster::daemon::node_context c;
  c.node = {8, 9, {"eth0", "ib0"}, {"mlx5_0"}};
  return router(c);
}

json ask(const router& r, const std::string& line) {
  const auto reply = r.handle(line);
  INFO(reply);
  REQUIRE(reply.find('\n') == std::string::npos);  // one line
  return json::parse(reply);
}

// The error code of a reply that must be an error.
std::string error_code(const json& reply) {
  REQUIRE(reply["version"] == 1);
  REQUIRE(reply["ok"] == false);
  return reply["error"]["code"];
}

const json* find_variable(const json& list, const std::string& variable) {
  for (const auto& d : list)
    if (d["variable"] == variable) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE(
    "an env request gets the node's policy: what to set and unset, each with its rule "
    "and reason",
    "[router]") {
  const auto reply = ask(gpu_node(), R"({"version": 1, "request": "env",
      "job": {"tp": 2, "sharding": "no_shard", "torch_version": "2.5.1", "dump_dir": "/runs/r1"},
      "env": {"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "NCCL_SOCKET_IFNAME": "bond"}})");
  REQUIRE(reply["ok"] == true);
  CHECK(reply["version"] == 1);
  const auto* connections = find_variable(reply["set"], "CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(connections);
  CHECK((*connections)["value"] == "1");
  CHECK((*connections)["rule"] == "cuda-max-connections-tp-cp");
  CHECK((*connections)["reason"].get<std::string>().find("tensor = 2") != std::string::npos);
  CHECK((*find_variable(reply["set"], "CUDA_DEVICE_ORDER"))["reason"].get<std::string>().find(
            "; was FASTEST_FIRST") != std::string::npos);
  CHECK((*find_variable(reply["set"], "NCCL_SOCKET_IFNAME"))["value"] == "=eth0,ib0");
  CHECK((*find_variable(reply["set"], "NCCL_IB_HCA"))["value"] == "=mlx5_0");
  CHECK((*find_variable(reply["set"], "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"))["value"] ==
        "/runs/r1/nccl_trace_rank_");
  CHECK(reply["unset"].empty());
  CHECK(reply["errors"].empty());

  const auto fsdp = ask(gpu_node(), R"({"version": 1, "request": "env",
      "job": {"tp": 2, "sharding": "optim_grads_params"}, "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}})");
  const auto* unset = find_variable(fsdp["unset"], "CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(unset);
  CHECK((*unset)["rule"] == "cuda-max-connections-fsdp");
  CHECK_FALSE(unset->contains("value"));
}

TEST_CASE(
    "an env request for a combination that cannot work gets the errors and the settings "
    "overridden",
    "[router]") {
  const auto reply = ask(gpu_node(), R"({"version": 1, "request": "env",
      "job": {"sharding": "optim_grads_params", "features": {"nccl_ub": true}},
      "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}})");
  REQUIRE(reply["ok"] == true);  // served: the errors are the answer
  REQUIRE(reply["errors"].size() == 1);
  CHECK(reply["errors"][0]["rule"] == "nccl-ub-expandable-segments");
  CHECK(reply["errors"][0]["message"].get<std::string>().find(
            "comm.nccl_ub = true and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") !=
        std::string::npos);
  REQUIRE(reply["settings"].size() == 1);
  CHECK(reply["settings"][0]["setting"] == "fsdp_double_buffer");
  CHECK(reply["settings"][0]["value"] == "true");
}

TEST_CASE("a request with no job fields takes the defaults", "[router]") {
  const auto reply = ask(router({}), R"({"version": 1, "request": "env"})");
  CHECK(reply["ok"] == true);
  CHECK(reply["set"].empty());  // no GPUs described, nothing asked
}

TEST_CASE("bad requests get error replies naming what was wrong, never an exception", "[router]") {
  const router r = gpu_node();
  CHECK(error_code(ask(r, "not json")) == "bad_json");
  CHECK(error_code(ask(r, "")) == "bad_json");
  CHECK(error_code(ask(r, "[1, 2]")) == "bad_json");
  CHECK(error_code(ask(r, R"({"version": 1, "request": "env")")) == "bad_json");  // cut short
  CHECK(error_code(ask(r, R"({"request": "env"})")) == "unsupported_version");
  CHECK(error_code(ask(r, R"({"version": 2, "request": "env"})")) == "unsupported_version");
  CHECK(error_code(ask(r, R"({"version": "1", "request": "env"})")) == "unsupported_version");
  CHECK(error_code(ask(r, R"({"version": 1})")) == "bad_request");
  CHECK(error_code(ask(r, R"({"version": 1, "request": "reboot"})")) == "unknown_request");
  struct bad {
    const char* request;
    const char* names;
  };
  for (const auto& [request, names] : {
           bad{R"({"version": 1, "request": "env", "jobs": {}})",
               "request: unknown field \"jobs\""},
           bad{R"({"version": 1, "request": "env", "job": []})", "request.job: expected an object"},
           bad{R"({"version": 1, "request": "env", "job": {"tp": 0}})",
               "job.tp: expected a whole number from 1, got 0"},
           bad{R"({"version": 1, "request": "env", "job": {"tp": 1.5}})",
               "job.tp: expected a whole number"},
           bad{R"({"version": 1, "request": "env", "job": {"tp": 99999999999}})",
               "job.tp: expected a whole number"},
           bad{R"({"version": 1, "request": "env", "job": {"sharding": "zero3"}})",
               "job.sharding: \"zero3\" is not one of"},
           bad{R"({"version": 1, "request": "env", "job": {"features": {"nccl_ub": "yes"}}})",
               "job.features.nccl_ub: expected true or false"},
           bad{R"({"version": 1, "request": "env", "job": {"features": {"fp8": true}}})",
               "job.features: unknown field \"fp8\""},
           bad{R"({"version": 1, "request": "env", "env": {"A": 1}})", "env.A: expected a string"},
       }) {
    INFO(request);
    const auto reply = ask(r, request);
    CHECK(error_code(reply) == "bad_request");
    CHECK(reply["error"]["message"].get<std::string>().find(names) != std::string::npos);
  }
}

TEST_CASE("a request line over the size limit is refused without being parsed", "[router]") {
  std::string line = R"({"version": 1, "request": "env", "env": {"X": ")";
  line += std::string(muster::daemon::kMaxRequestBytes, 'x') + "\"}}";
  const auto reply = ask(gpu_node(), line);
  CHECK(error_code(reply) == "too_large");
}

TEST_CASE("the router survives random and mutated request lines", "[router]") {
  // a bounded randomised test of the parser: every reply is one JSON line with ok and version
  const router r = gpu_node();
  const std::string seed =
      R"({"version": 1, "request": "env", "job": {"tp": 2, "features": {"nccl_ub": true}}, "env": {"A": "b"}})";
  std::uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int i = 0; i < 20000; ++i) {
    std::string line = seed;
    const int edits = 1 + int(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const auto at = next() % (line.size() + 1);
      switch (next() % 3) {
        case 0:
          line.insert(line.begin() + at, char(next() % 256));
          break;
        case 1:
          if (at < line.size()) line.erase(at, 1);
          break;
        default:
          if (at < line.size()) line[at] = char(next() % 256);
          break;
      }
    }
    const auto reply = json::parse(r.handle(line), nullptr, false);
    INFO(line);
    REQUIRE(reply.is_object());
    REQUIRE(reply["version"] == 1);
    REQUIRE(reply["ok"].is_boolean());
  }
}

TEST_CASE(
    "user values with quotes, backslashes and control characters come back intact in "
    "the reply",
    "[router]") {
  const auto reply = ask(gpu_node(), R"({"version": 1, "request": "env",
      "env": {"CUDA_DEVICE_ORDER": "odd \"order\" \\ with\ttab\nand é"}})");
  const auto* order = find_variable(reply["set"], "CUDA_DEVICE_ORDER");
  REQUIRE(order);
  CHECK_THAT((*order)["reason"].get<std::string>(),
             Catch::EndsWith("; was odd \"order\" \\ with\ttab\nand é"));
}

TEST_CASE(
    "a status request reports the daemon's version and uptime, the node's facts and the "
    "site's policy",
    "[router]") {
  muster::daemon::node_context c;
  c.node = {8, 9, {"eth0", "ib0"}, {"mlx5_0"}};
  c.site.nvls_off = true;
  c.started = std::chrono::steady_clock::now() - std::chrono::seconds(90);
  const auto reply = ask(router(c), R"({"version": 1, "request": "status"})");
  REQUIRE(reply["ok"] == true);
  CHECK(reply["daemon"]["version"].is_string());
  CHECK(reply["daemon"]["git"].is_string());
  CHECK(reply["daemon"]["uptime_s"].get<double>() >= 90.0);
  CHECK(reply["daemon"]["uptime_s"].get<double>() < 100.0);
  CHECK(reply["node"]["gpus"] == 8);
  CHECK(reply["node"]["compute_major"] == 9);
  CHECK(reply["node"]["interfaces"] == json::array({"eth0", "ib0"}));
  CHECK(reply["node"]["ib_hcas"] == json::array({"mlx5_0"}));
  CHECK(reply["policy"]["nvls_off"] == true);
  CHECK(reply["policy"]["trace_buffer"] == 2000);
  const auto bad = ask(router(c), R"({"version": 1, "request": "status", "verbose": true})");
  CHECK(error_code(bad) == "bad_request");
}

TEST_CASE("an env request's gpus are the GPUs its step sees, over the node's", "[router]") {
  // a CPU-only step on a GPU node gets no GPU variables; a GPU step on it does
  const auto cpu_step = ask(gpu_node(), R"({"version": 1, "request": "env", "job": {"gpus": 0}})");
  CHECK_FALSE(find_variable(cpu_step["set"], "CUDA_DEVICE_ORDER"));
  const auto gpu_step = ask(gpu_node(), R"({"version": 1, "request": "env", "job": {"gpus": 1}})");
  CHECK(find_variable(gpu_step["set"], "CUDA_DEVICE_ORDER"));
  const auto bad = ask(gpu_node(), R"({"version": 1, "request": "env", "job": {"gpus": -1}})");
  CHECK(error_code(bad) == "bad_request");
  CHECK(bad["error"]["message"].get<std::string>().find(
            "job.gpus: expected a whole number from 0") != std::string::npos);
  // a deeply nested value is named by its type, not written back
  std::string deep = R"({"version": 1, "request": "env", "job": {"tp": )";
  deep += std::string(20000, '[') + std::string(20000, ']') + "}}";
  const auto nested = ask(gpu_node(), deep);
  CHECK(error_code(nested) == "bad_request");
  CHECK(nested["error"]["message"].get<std::string>().find("got array") != std::string::npos);
}
