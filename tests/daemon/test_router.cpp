// Tests of musterd's router (daemon/router.hpp): request lines in, reply lines out, no sockets.
// The env request on a described GPU node, and every kind of bad request.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "daemon/node_store.hpp"
#include "daemon/protocol.hpp"
#include "daemon/router.hpp"
#include "tests/support/temp_dir.hpp"

using muster::daemon::node_store;
using muster::daemon::router;
using nlohmann::json;

namespace {

// Who asks: root, or an ordinary user.
constexpr uid_t kRoot = 0;
constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;

// A node store for one test, in a fresh directory.
struct test_store {
  muster::test::temp_dir dir{"node-store"};
  node_store store{dir / "musterd.db", 90};
};

// The reply line to `line` from `uid`, with its store work (if any) run on `store`.
std::string reply_line(const router& r, const std::string& line, uid_t uid, node_store* store) {
  auto routed = r.route(line, {1234, uid, uid});
  if (!routed.work) return routed.reply;
  if (store) return routed.work(*store);
  test_store own;
  return routed.work(own.store);
}

// An H100 node with two NICs and one HCA.
router gpu_node() {
  muster::daemon::node_context c;
  c.node = {8, 9, {"eth0", "ib0"}, {"mlx5_0"}};
  return router(c);
}

json ask(const router& r, const std::string& line, uid_t uid = kRoot, node_store* store = nullptr) {
  const auto reply = reply_line(r, line, uid, store);
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
  CHECK((*find_variable(reply["set"], "NCCL_SOCKET_IFNAME"))["value"] == "=ib0");
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
  test_store own;
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
    const auto reply = json::parse(reply_line(r, line, kRoot, &own.store), nullptr, false);
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

TEST_CASE("a step's start and end are recorded, and its owner alone (or root) reads the job",
          "[router]") {
  test_store s;
  muster::daemon::node_context c;
  c.slurm.squeue = "";  // no Slurm: a job belongs to the uid that first records it
  const router r(c);
  auto start = ask(r, R"({"version": 1, "request": "record", "event": "start",
      "job": {"id": "run-7", "step": "0"}, "run_dir": "/runs/r7", "num_ranks": 4})",
                   kAlice, &s.store);
  REQUIRE(start["ok"] == true);
  CHECK(start["recorded"] == "start");
  // bob may neither end alice's step nor read her job; nor claim it with an env request
  auto bob_end = ask(r, R"({"version": 1, "request": "record", "event": "end",
      "job": {"id": "run-7", "step": "0"}, "state": "completed", "exit_code": 0})",
                     kBob, &s.store);
  CHECK(error_code(bob_end) == "denied");
  CHECK_THAT(bob_end["error"]["message"].get<std::string>(),
             Catch::Contains("job run-7 belongs to uid 1000") &&
                 Catch::Contains("who first recorded it") && Catch::Contains("uid 1001"));
  CHECK(error_code(ask(r, R"({"version": 1, "request": "job", "job": {"id": "run-7"}})", kBob,
                       &s.store)) == "denied");
  CHECK(error_code(ask(r, R"({"version": 1, "request": "env", "job": {"id": "run-7", "tp": 2}})",
                       kBob, &s.store)) == "denied");
  // alice asks for her step's environment (recorded), and ends it
  auto env = ask(r, R"({"version": 1, "request": "env", "job": {"id": "run-7", "step": "0",
      "tp": 2}})",
                 kAlice, &s.store);
  REQUIRE(env["ok"] == true);
  auto end = ask(r, R"({"version": 1, "request": "record", "event": "end",
      "job": {"id": "run-7", "step": "0"}, "state": "failed", "exit_code": 3,
      "message": "rank 2 failed first"})",
                 kAlice, &s.store);
  REQUIRE(end["ok"] == true);
  for (uid_t reader : {kAlice, kRoot}) {
    auto job =
        ask(r, R"({"version": 1, "request": "job", "job": {"id": "run-7"}})", reader, &s.store);
    REQUIRE(job["ok"] == true);
    CHECK(job["job"]["uid"] == kAlice);
    CHECK(job["job"]["owner_from"] == "first_record");
    REQUIRE(job["steps"].size() == 1);
    CHECK(job["steps"][0]["state"] == "failed");
    CHECK(job["steps"][0]["exit_code"] == 3);
    CHECK(job["steps"][0]["pid"] == 1234);
    CHECK(job["steps"][0]["run_dir"] == "/runs/r7");
    CHECK(job["steps"][0]["message"] == "rank 2 failed first");
    bool saw_connections = false;
    for (const auto& d : job["decisions"])
      saw_connections = saw_connections || (d["rule"] == "cuda-max-connections-tp-cp" &&
                                            d["action"] == "set" && d["value"] == "1");
    CHECK(saw_connections);
  }
  // everyone sees the step in the public status
  auto status = ask(r, R"({"version": 1, "request": "status"})", kBob, &s.store);
  REQUIRE(status["recent_steps"].size() == 1);
  CHECK(status["recent_steps"][0]["job"] == "run-7");
  CHECK(status["recent_steps"][0]["state"] == "failed");
}

TEST_CASE("records of an unknown job or step, and malformed records, get clear errors",
          "[router]") {
  test_store s;
  muster::daemon::node_context c;
  c.slurm.squeue = "";
  const router r(c);
  auto unknown =
      ask(r, R"({"version": 1, "request": "job", "job": {"id": "nope"}})", kAlice, &s.store);
  CHECK(error_code(unknown) == "not_found");
  CHECK(error_code(ask(r, R"({"version": 1, "request": "record", "event": "end",
      "job": {"id": "nope", "step": "0"}, "state": "completed"})",
                       kAlice, &s.store)) == "not_found");
  REQUIRE(ask(r, R"({"version": 1, "request": "record", "event": "start", "job": {"id": "j1"}})",
              kAlice, &s.store)["ok"] == true);
  auto never = ask(r, R"({"version": 1, "request": "record", "event": "end",
      "job": {"id": "j1", "step": "3"}, "state": "completed"})",
                   kAlice, &s.store);
  CHECK(error_code(never) == "not_found");
  CHECK_THAT(never["error"]["message"].get<std::string>(),
             Catch::Contains("step \"3\" never started"));
  for (const char* bad : {
           R"({"version": 1, "request": "record", "job": {"id": "j1"}})",
           R"({"version": 1, "request": "record", "event": "pause", "job": {"id": "j1"}})",
           R"({"version": 1, "request": "record", "event": "start", "job": {}})",
           R"({"version": 1, "request": "record", "event": "start", "job": {"id": "a b"}})",
           R"({"version": 1, "request": "record", "event": "end", "job": {"id": "j1"},
               "state": "exploded"})",
           R"({"version": 1, "request": "record", "event": "start", "job": {"id": "j1"},
               "num_ranks": -1})",
           R"({"version": 1, "request": "job", "job": {"id": "j1", "extra": 1}})",
           R"({"version": 1, "request": "env", "job": {"step": "0"}})",
       }) {
    INFO(bad);
    CHECK(error_code(ask(r, bad, kAlice, &s.store)) == "bad_request");
  }
}

TEST_CASE("squeue's owner line is read for the uid, and only Slurm-shaped ids go to Slurm",
          "[router]") {
  using muster::daemon::looks_like_slurm_job;
  using muster::daemon::parse_squeue_owner;
  CHECK(parse_squeue_owner("1000") == uid_t{1000});
  CHECK(parse_squeue_owner("  65534\n65534\n") == uid_t{65534});  // an array job's tasks
  CHECK_FALSE(parse_squeue_owner("slurm_load_jobs error: Invalid job id specified"));
  CHECK_FALSE(parse_squeue_owner(""));
  CHECK_FALSE(parse_squeue_owner("alice"));
  CHECK_FALSE(parse_squeue_owner("99999999999"));
  CHECK(looks_like_slurm_job("4242"));
  CHECK(looks_like_slurm_job("4242_7"));
  CHECK(looks_like_slurm_job("4242+1"));
  CHECK_FALSE(looks_like_slurm_job("muster-job-20261122"));
  CHECK_FALSE(looks_like_slurm_job("42_"));
  CHECK_FALSE(looks_like_slurm_job(""));
}

TEST_CASE("a node store from a newer musterd, or a foreign file, is refused by name", "[router]") {
  muster::test::temp_dir dir{"node-store"};
  { node_store first(dir / "musterd.db", 90); }
  {
    // the same file opens again (migrations are idempotent), keeping what it holds
    node_store again(dir / "musterd.db", 90);
    again.set_owner("j", {kAlice, "first_record"}, 1);
  }
  CHECK(node_store(dir / "musterd.db", 90).owner_of("j").has_value() == false);  // 1 ms: too old
  {
    // an owner seen long ago stays while its job has records: they must not become claimable
    node_store again(dir / "musterd.db", 90);
    again.set_owner("k", {kAlice, "first_record"}, 1);
    muster::daemon::step_entry step;
    step.job_id = "k";
    step.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    again.step_started(step);
  }
  CHECK(node_store(dir / "musterd.db", 90).owner_of("k").has_value());
  // the store is root's alone: a new state directory 0700, the file 0600
  { node_store fresh(dir / "state/musterd.db", 90); }
  namespace fs = std::filesystem;
  CHECK((fs::status(dir / "state").permissions() & fs::perms::all) == fs::perms::owner_all);
  CHECK((fs::status(dir / "state/musterd.db").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  muster::test::write_file(dir / "foreign.db", "this is not SQLite at all, just text.......");
  try {
    node_store foreign(dir / "foreign.db", 90);
    FAIL("a foreign file was opened");
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Catch::Contains("foreign.db"));
  }
}

TEST_CASE("where Slurm is configured but cannot be asked, a Slurm job is refused to all but root",
          "[router]") {
  test_store s;
  muster::daemon::node_context c;
  c.slurm.squeue = "/nonexistent/squeue";
  c.slurm.conf = "/etc/slurm/slurm.conf";  // this node has Slurm: a missing squeue is a fault
  const router r(c);
  const std::string start =
      R"({"version": 1, "request": "record", "event": "start", "job": {"id": "4242"}})";
  const auto alice = ask(r, start, kAlice, &s.store);
  CHECK(error_code(alice) == "unavailable");
  CHECK_THAT(alice["error"]["message"].get<std::string>(),
             Catch::Contains("cannot tell who owns job 4242: cannot run /nonexistent/squeue"));
  CHECK(ask(r, start, kRoot, &s.store)["ok"] == true);
  // a local run's id needs no Slurm
  CHECK(ask(r, R"({"version": 1, "request": "record", "event": "start", "job": {"id": "run-1"}})",
            kAlice, &s.store)["ok"] == true);
}

TEST_CASE("a failing squeue's lines reach the reply as one line, with the key that turns Slurm off",
          "[router]") {
  test_store s;
  muster::test::temp_dir dir{"fake-squeue"};
  const auto squeue = dir / "squeue";  // slurmctld down, as squeue says it: two lines on stderr
  muster::test::write_file(squeue,
                           "#!/bin/sh\n"
                           "echo 'squeue: error: Unable to contact slurm controller' >&2\n"
                           "echo 'squeue: fatal: Could not load job information' >&2\n"
                           "exit 1\n");
  std::filesystem::permissions(squeue, std::filesystem::perms::owner_all);
  muster::daemon::node_context c;
  c.slurm.squeue = squeue.string();
  const router r(c);
  const auto reply = ask(r, R"({"version": 1, "request": "record", "event": "start",
                               "job": {"id": "123"}})",
                         kAlice, &s.store);
  REQUIRE(error_code(reply) == "unavailable");
  const auto message = reply["error"]["message"].get<std::string>();
  CHECK(message.find('\n') == std::string::npos);
  CHECK_THAT(message, Catch::Contains("squeue --jobs=123: squeue: error: Unable to contact slurm "
                                      "controller; squeue: fatal: Could not load job information; "
                                      "try again when slurmctld answers"));
  CHECK_THAT(message, Catch::Contains("slurm.squeue = \"\""));
}
