// Tests of the GPU environment policy (common/gpu_policy.hpp): each rule firing, staying quiet,
// and what it does to a user's own value; the rule table in docs/policy-rules.md.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "common/gpu_policy.hpp"
#include "tests/support/expect_error.hpp"

using namespace muster;

namespace {

// A GPU node: 8 GPUs of compute capability 9 (H100), two NICs and two HCAs.
gpu_policy_input gpu_job() {
  gpu_policy_input in;
  in.node = {8, 9, {"eth0", "ib0"}, {"mlx5_0", "mlx5_1"}};
  return in;
}

// The decision for `variable`, if any.
std::optional<gpu_policy_decision> decision(const gpu_policy_result& r,
                                            const std::string& variable) {
  for (const auto& d : r.env)
    if (d.variable == variable) return d;
  return std::nullopt;
}

bool refused(const gpu_policy_result& r, const std::string& rule) {
  for (const auto& e : r.errors)
    if (e.rule == rule) return true;
  return false;
}

}  // namespace

TEST_CASE(
    "TP or CP without FSDP before Blackwell gets CUDA_DEVICE_MAX_CONNECTIONS=1 with its reason",
    "[gpu_policy]") {
  gpu_policy_input in;
  in.tp = 2;
  auto d = decision(decide_gpu_policy(in), "CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(d);
  CHECK(d->rule == "cuda-max-connections-tp-cp");
  CHECK(d->value == "1");
  CHECK_THAT(d->reason, Catch::Contains("tensor = 2, context = 1 without FSDP sharding"));
  in.tp = 1;
  in.cp = 2;
  in.sharding = "optim";
  in.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}};
  d = decision(decide_gpu_policy(in), "CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(d);
  CHECK_THAT(d->reason, Catch::EndsWith("; was 8"));
  // nothing to do: no model parallelism, or a Blackwell node, or the value already 1
  CHECK_FALSE(decision(decide_gpu_policy({}), "CUDA_DEVICE_MAX_CONNECTIONS"));
  auto blackwell = gpu_job();
  blackwell.tp = 2;
  blackwell.node.compute_major = 10;
  CHECK_FALSE(decision(decide_gpu_policy(blackwell), "CUDA_DEVICE_MAX_CONNECTIONS"));
  in.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  CHECK_FALSE(decision(decide_gpu_policy(in), "CUDA_DEVICE_MAX_CONNECTIONS"));
}

TEST_CASE("FSDP sharding unsets a CUDA_DEVICE_MAX_CONNECTIONS of 1 and keeps larger ones",
          "[gpu_policy]") {
  gpu_policy_input in;
  in.tp = 2;
  in.sharding = "optim_grads_params";
  in.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  auto r = decide_gpu_policy(in);
  auto d = decision(r, "CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(d);
  CHECK(d->rule == "cuda-max-connections-fsdp");
  CHECK_FALSE(d->value.has_value());
  env_vars env = in.env;
  apply_gpu_policy(r.env, env);
  CHECK(env.count("CUDA_DEVICE_MAX_CONNECTIONS") == 0);
  in.sharding = "optim_grads";
  in.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "32"}};
  CHECK_FALSE(decision(decide_gpu_policy(in), "CUDA_DEVICE_MAX_CONNECTIONS"));
}

TEST_CASE(
    "the overlapped expert all-to-all unsets a CUDA_DEVICE_MAX_CONNECTIONS of 1, and is "
    "refused with TP before Blackwell",
    "[gpu_policy]") {
  gpu_policy_input in;
  in.ep = 4;
  in.ep_comm_overlap = true;
  in.env = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  auto d = decision(decide_gpu_policy(in), "CUDA_DEVICE_MAX_CONNECTIONS");
  REQUIRE(d);
  CHECK(d->rule == "cuda-max-connections-ep-overlap");
  CHECK_FALSE(d->value);
  in.ep_comm_overlap = false;  // without the overlap, a 1 is kept
  CHECK_FALSE(decision(decide_gpu_policy(in), "CUDA_DEVICE_MAX_CONNECTIONS"));
  in.ep_comm_overlap = true;
  in.tp = 2;
  auto r = decide_gpu_policy(in);
  REQUIRE(refused(r, "cuda-max-connections-conflict"));
  CHECK_THAT(r.errors[0].message, Catch::Contains("turn the expert all-to-all overlap off"));
  CHECK_FALSE(decision(r, "CUDA_DEVICE_MAX_CONNECTIONS"));
  in.sharding = "optim_grads_params";  // the fix the message names
  CHECK(decide_gpu_policy(in).errors.empty());
}

TEST_CASE(
    "NCCL user buffers with expandable segments are refused before torch 2.11, naming "
    "both and the fix",
    "[gpu_policy]") {
  for (const char* variable : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    INFO(variable);
    gpu_policy_input in;
    in.nccl_ub = true;
    in.torch_version = "2.5.1+cu124";
    in.env = {{variable, "max_split_size_mb:512,expandable_segments:True"}};
    auto r = decide_gpu_policy(in);
    REQUIRE(refused(r, "nccl-ub-expandable-segments"));
    auto message = test::expect_error(errc::config, [&] { require_gpu_policy(r); });
    CHECK_THAT(message, Catch::Contains(std::string("comm.nccl_ub = true and ") + variable +
                                        "=max_split_size_mb:512,expandable_segments:True cannot "
                                        "be used together"));
    CHECK_THAT(message, Catch::Contains("before PyTorch 2.11 (this job: 2.5.1+cu124)"));
    CHECK_THAT(message,
               Catch::Contains("remove expandable_segments:True, or set comm.nccl_ub = false "
                               "(a plain srun's --muster-policy: drop expandable_segments or "
                               "nccl_ub from its list)"));
    CHECK_THAT(message, Catch::Contains("(rule nccl-ub-expandable-segments)"));
    in.torch_version = "";  // unknown counts as before
    CHECK(refused(decide_gpu_policy(in), "nccl-ub-expandable-segments"));
    in.torch_version = "2.11.0";
    CHECK(decide_gpu_policy(in).errors.empty());
  }
  gpu_policy_input in;
  in.nccl_ub = true;
  in.expandable_segments = true;  // asked for through muster, not the environment
  auto asked = decide_gpu_policy(in);
  REQUIRE(refused(asked, "nccl-ub-expandable-segments"));
  CHECK_THAT(asked.errors[0].message,
             Catch::Contains("comm.nccl_ub = true and expandable segments asked for"));
  in.expandable_segments = false;
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"}};
  CHECK(decide_gpu_policy(in).errors.empty());
  in.nccl_ub = false;
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}};
  CHECK(decide_gpu_policy(in).errors.empty());
}

TEST_CASE("NCCL user buffers under FSDP turn the double buffer on, with a warning",
          "[gpu_policy]") {
  gpu_policy_input in;
  in.nccl_ub = true;
  in.sharding = "optim_grads_params";
  auto r = decide_gpu_policy(in);
  REQUIRE(r.settings.size() == 1);
  CHECK(r.settings[0].rule == "nccl-ub-double-buffer");
  CHECK(r.settings[0].setting == "fsdp_double_buffer");
  CHECK(r.settings[0].value == "true");
  in.fsdp_double_buffer = true;
  CHECK(decide_gpu_policy(in).settings.empty());
  in.fsdp_double_buffer = false;
  in.nccl_ub = false;
  CHECK(decide_gpu_policy(in).settings.empty());
}

TEST_CASE("the allocator settings go under both names, the same, and differing ones are refused",
          "[gpu_policy]") {
  gpu_policy_input in;
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512"}};
  auto r = decide_gpu_policy(in);
  auto d = decision(r, "PYTORCH_ALLOC_CONF");
  REQUIRE(d);
  CHECK(d->rule == "alloc-conf-both");
  CHECK(d->value == "max_split_size_mb:512");
  CHECK_FALSE(decision(r, "PYTORCH_CUDA_ALLOC_CONF"));  // the user's, untouched
  // the same options spelled differently are the same
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb: 512"},
            {"PYTORCH_ALLOC_CONF", "max_split_size_mb:512"}};
  CHECK(decide_gpu_policy(in).env.empty());
  // ...and in another order
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,expandable_segments:True"},
            {"PYTORCH_ALLOC_CONF", "expandable_segments:True,max_split_size_mb:128"}};
  CHECK(decide_gpu_policy(in).errors.empty());
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512"},
            {"PYTORCH_ALLOC_CONF", "expandable_segments:True"}};
  r = decide_gpu_policy(in);
  REQUIRE(refused(r, "alloc-conf-mismatch"));
  CHECK_THAT(r.errors[0].message,
             Catch::Contains("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512 and "
                             "PYTORCH_ALLOC_CONF=expandable_segments:True differ"));
  CHECK_THAT(r.errors[0].message, Catch::Contains("set both to the same value, or unset one"));
  CHECK(decide_gpu_policy({}).env.empty());  // nothing set, nothing asked: nothing added
}

TEST_CASE(
    "expandable segments asked for are added to the user's allocator options under both "
    "names",
    "[gpu_policy]") {
  gpu_policy_input in;
  in.expandable_segments = true;
  in.env = {{"PYTORCH_ALLOC_CONF", "max_split_size_mb:256,expandable_segments:False"}};
  auto r = decide_gpu_policy(in);
  for (const char* name : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    auto d = decision(r, name);
    REQUIRE(d);
    CHECK(d->rule == "alloc-conf-expandable");
    CHECK(d->value == "max_split_size_mb:256,expandable_segments:True");
  }
  CHECK_THAT(decision(r, "PYTORCH_ALLOC_CONF")->reason,
             Catch::EndsWith("; was max_split_size_mb:256,expandable_segments:False"));
}

TEST_CASE("CUDA graphs with expandable segments get NCCL_GRAPH_REGISTER=0, over the user's",
          "[gpu_policy]") {
  gpu_policy_input in;
  in.cuda_graphs = true;
  CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_GRAPH_REGISTER"));
  in.env = {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}, {"NCCL_GRAPH_REGISTER", "1"}};
  auto d = decision(decide_gpu_policy(in), "NCCL_GRAPH_REGISTER");
  REQUIRE(d);
  CHECK(d->rule == "expandable-segments-cuda-graphs");
  CHECK(d->value == "0");
  CHECK_THAT(d->reason, Catch::EndsWith("; was 1"));
  in.cuda_graphs = false;
  CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_GRAPH_REGISTER"));
}

TEST_CASE(
    "on GPUs, timeouts leave a flight-recorder dump in the run directory, the user's "
    "values kept",
    "[gpu_policy]") {
  auto in = gpu_job();
  in.dump_dir = "/runs/r1";
  in.env = {{"TORCH_NCCL_TRACE_BUFFER_SIZE", "5000"}};
  auto r = decide_gpu_policy(in);
  CHECK(decision(r, "TORCH_NCCL_ASYNC_ERROR_HANDLING")->value == "3");
  CHECK(decision(r, "TORCH_NCCL_DUMP_ON_TIMEOUT")->value == "1");
  CHECK(decision(r, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")->value == "/runs/r1/nccl_trace_rank_");
  CHECK(decision(r, "TORCH_NCCL_DUMP_ON_TIMEOUT")->rule == "nccl-flight-recorder");
  CHECK_FALSE(decision(r, "TORCH_NCCL_TRACE_BUFFER_SIZE"));  // the user's 5000 kept
  in.env.clear();
  in.site.trace_buffer = 100;
  CHECK(decision(decide_gpu_policy(in), "TORCH_NCCL_TRACE_BUFFER_SIZE")->value == "100");
  CHECK_FALSE(decision(decide_gpu_policy({}), "TORCH_NCCL_DUMP_ON_TIMEOUT"));  // no GPUs
}

TEST_CASE(
    "NCCL_SOCKET_IFNAME and NCCL_IB_HCA come from the node, and a user's list that "
    "selects nothing there is replaced",
    "[gpu_policy]") {
  auto in = gpu_job();
  auto r = decide_gpu_policy(in);
  CHECK(decision(r, "NCCL_SOCKET_IFNAME")->value == "=ib0");  // IPoIB, as NCCL prefers it
  CHECK_THAT(decision(r, "NCCL_SOCKET_IFNAME")->reason, Catch::Contains("network interfaces"));
  CHECK(decision(r, "NCCL_SOCKET_IFNAME")->rule == "nccl-socket-ifname");
  CHECK(decision(r, "NCCL_IB_HCA")->value == "=mlx5_0,mlx5_1");
  CHECK(decision(r, "NCCL_IB_HCA")->rule == "nccl-ib-hca");
  // lists NCCL can use here stay: prefixes, exact names, exclusions, ports
  for (const char* ok : {"eth", "=ib0", "^docker,lo", "en,eth", "lo", "=lo", "eth0", "^ib"}) {
    in.env = {{"NCCL_SOCKET_IFNAME", ok}};
    INFO(ok);
    CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_SOCKET_IFNAME"));
  }
  in.env = {{"NCCL_IB_HCA", "mlx5_1:1"}};
  CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_IB_HCA"));
  // a list that selects nothing on this node
  for (const char* bad : {"bond0", "=eth", "^eth,ib"}) {
    in.env = {{"NCCL_SOCKET_IFNAME", bad}};
    INFO(bad);
    auto d = decision(decide_gpu_policy(in), "NCCL_SOCKET_IFNAME");
    REQUIRE(d);
    CHECK(d->value == "=ib0");
    CHECK_THAT(d->reason,
               Catch::Contains(std::string("NCCL_SOCKET_IFNAME=") + bad +
                               " selects none of the node's network interfaces (eth0, ib0)"));
  }
  in.env = {{"NCCL_IB_HCA", "mlx4_0"}};
  CHECK(decision(decide_gpu_policy(in), "NCCL_IB_HCA")->value == "=mlx5_0,mlx5_1");
  CHECK_THAT(decision(decide_gpu_policy(in), "NCCL_IB_HCA")->reason,
             Catch::Contains("selects none of the node's InfiniBand HCAs (mlx5_0, mlx5_1): NCCL "
                             "finds no InfiniBand device and falls back to TCP sockets"));
  // set but empty: as unset
  in.env = {{"NCCL_SOCKET_IFNAME", ""}};
  CHECK(decision(decide_gpu_policy(in), "NCCL_SOCKET_IFNAME")->value == "=ib0");
  // no IPoIB: every interface
  in.env.clear();
  in.node.interfaces = {"eth0", "eth1"};
  CHECK(decision(decide_gpu_policy(in), "NCCL_SOCKET_IFNAME")->value == "=eth0,eth1");
  in.node.ib_hcas.clear();  // no HCAs: nothing said
  CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_IB_HCA"));
}

TEST_CASE(
    "NVLink SHARP goes off where the site says (over the user) or memory is tight (unless "
    "the user set it)",
    "[gpu_policy]") {
  auto in = gpu_job();
  CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_NVLS_ENABLE"));
  in.memory_tight = true;
  CHECK(decision(decide_gpu_policy(in), "NCCL_NVLS_ENABLE")->value == "0");
  in.env = {{"NCCL_NVLS_ENABLE", "1"}};
  CHECK_FALSE(decision(decide_gpu_policy(in), "NCCL_NVLS_ENABLE"));
  in.site.nvls_off = true;
  auto d = decision(decide_gpu_policy(in), "NCCL_NVLS_ENABLE");
  REQUIRE(d);
  CHECK(d->rule == "nccl-nvls-off");
  CHECK(d->value == "0");
  CHECK_THAT(d->reason, Catch::Contains("the site turns NVLink SHARP off"));
}

TEST_CASE("on GPUs, CUDA numbers devices by PCI bus, over the user's order", "[gpu_policy]") {
  auto in = gpu_job();
  in.env = {{"CUDA_DEVICE_ORDER", "FASTEST_FIRST"}};
  auto d = decision(decide_gpu_policy(in), "CUDA_DEVICE_ORDER");
  REQUIRE(d);
  CHECK(d->rule == "cuda-device-order");
  CHECK(d->value == "PCI_BUS_ID");
  CHECK_THAT(d->reason, Catch::EndsWith("; was FASTEST_FIRST"));
  in.env = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  CHECK_FALSE(decision(decide_gpu_policy(in), "CUDA_DEVICE_ORDER"));
  CHECK_FALSE(decision(decide_gpu_policy({}), "CUDA_DEVICE_ORDER"));  // no GPUs
}

TEST_CASE("a CPU-only job gets no GPU variables at all", "[gpu_policy]") {
  gpu_policy_input in;
  in.sharding = "optim_grads_params";
  in.node.interfaces = {"eth0"};
  CHECK(decide_gpu_policy(in).env.empty());
}

TEST_CASE("every rule is in the rule table of docs/policy-rules.md", "[gpu_policy]") {
  std::ifstream file(std::string(MUSTER_SOURCE_DIR) + "/docs/policy-rules.md");
  REQUIRE(file);
  std::stringstream text;
  text << file.rdbuf();
  for (const auto& rule : gpu_policy_rules()) {
    INFO(rule);
    CHECK_THAT(text.str(), Catch::Contains("| `" + rule + "` |"));
  }
}

TEST_CASE("the policy reads only its own variables", "[gpu_policy]") {
  CHECK(gpu_policy_reads("PYTORCH_CUDA_ALLOC_CONF"));
  CHECK(gpu_policy_reads("NCCL_SOCKET_IFNAME"));
  CHECK(gpu_policy_reads("CUDA_DEVICE_ORDER"));
  CHECK_FALSE(gpu_policy_reads("HOME"));
  CHECK_FALSE(gpu_policy_reads("AWS_SECRET_ACCESS_KEY"));
}
