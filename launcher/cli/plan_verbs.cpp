// `muster plan JOB.toml [key=value ...] [--world N | --nodes N --gpus-per-node G]
// [--gpu-memory SIZE] [--engine megatron|muster-train] [--json]`: the layout, rank groups, batch
// arithmetic and per-GPU memory of a job before any GPU is touched. Exit 0 when the plan is valid
// and fits, 3 when it is valid but will not fit, 2 for an invalid plan or input.
//
// The world comes from the flags; else, inside a Slurm job, from its nodes and GPUs (or tasks)
// per node; else from the parallel sizes when they name the data-parallel size; else from this
// machine as `muster run` would start it (launch.nproc, or one rank per GPU, or 2).
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "common/byte_size.hpp"
#include "common/error.hpp"
#include "common/job_config.hpp"
#include "launcher/cli/plan_output.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/local_gpus.hpp"
#include "launcher/plan/allocation.hpp"
#include "launcher/slurm_step.hpp"

namespace muster::cli {
namespace {

struct plan_options {
  std::vector<std::string> args;
  std::optional<int> world;
  std::optional<int> nodes;
  std::optional<int> gpus_per_node;
  std::string gpu_memory;
  std::string reserve;
  std::string engine;
  std::optional<int> rank;
  bool json = false;
};

// Whether the job file names the data-parallel size, so the sizes alone give the world.
bool sizes_give_world(const job_config& config) {
  if (config.parallel.allocation.empty()) return config.parallel.data > 0;
  try {
    return launcher::plan::parse_allocation(config.parallel.allocation).d > 0;
  } catch (const error&) {
    return true;  // let the planner report the allocation's mistake
  }
}

// Ranks per node of a Slurm job: GPUs on the node, else tasks on the first node.
int slurm_ranks_per_node(const launcher::slurm_step& step, const job_config& config) {
  if (config.launch.nproc > 0) return config.launch.nproc;
  if (step.gpus_on_node) return *step.gpus_on_node;
  if (!step.job_gpus.empty()) return static_cast<int>(step.job_gpus.size());
  return step.tasks_per_node.front();
}

void resolve_world(const plan_options& o, const job_config& config,
                   launcher::plan::plan_request& request) {
  MUSTER_CHECK(!(o.world && o.nodes), errc::invalid_input,
               "plan: give --world N or --nodes N --gpus-per-node G, not both");
  if (o.gpus_per_node) {
    request.gpus_per_node = *o.gpus_per_node;
    request.gpus_per_node_source = "--gpus-per-node";
  }
  if (o.world) {
    request.world = launcher::plan::world_size{*o.world, fmt::format("--world {}", *o.world)};
    return;
  }
  if (o.nodes) {
    MUSTER_CHECK(o.gpus_per_node || config.launch.nproc > 0, errc::invalid_input,
                 "plan: --nodes {} needs --gpus-per-node G (or launch.nproc in the job file)",
                 *o.nodes);
    int per_node = o.gpus_per_node ? *o.gpus_per_node : config.launch.nproc;
    request.gpus_per_node = per_node;
    if (!o.gpus_per_node) request.gpus_per_node_source = "launch.nproc";
    request.world = launcher::plan::world_size{
        *o.nodes * per_node,
        fmt::format("{} node{} x {} per node", *o.nodes, *o.nodes == 1 ? "" : "s", per_node)};
    return;
  }
  auto env = launcher::process_env();
  if (launcher::inside_slurm(env)) {
    auto step = launcher::read_slurm_step(env);
    int per_node = o.gpus_per_node ? *o.gpus_per_node : slurm_ranks_per_node(step, config);
    request.gpus_per_node = per_node;
    request.gpus_per_node_source = o.gpus_per_node ? "--gpus-per-node" : "the Slurm job";
    request.world = launcher::plan::world_size{
        step.num_nodes * per_node,
        fmt::format("Slurm job {}: {} node{} x {} per node", step.job_id, step.num_nodes,
                    step.num_nodes == 1 ? "" : "s", per_node)};
    return;
  }
  if (sizes_give_world(config)) return;  // the product of the sizes
  int gpus = launcher::count_local_gpus();
  int ranks = launcher::local_ranks(config.launch.nproc, gpus);
  std::string source = config.launch.nproc > 0
                           ? fmt::format("launch.nproc = {} on one node", ranks)
                           : fmt::format("this machine: {}", gpus > 0 ? fmt::format("{} GPUs", gpus)
                                                                      : std::string("no GPUs, 2 ranks"));
  request.world = launcher::plan::world_size{ranks, source + "; pass --world or --nodes"};
  if (!o.gpus_per_node) {
    request.gpus_per_node = ranks;
    request.gpus_per_node_source = config.launch.nproc > 0 ? "launch.nproc" : "this machine";
  }
}

// An invalid plan as JSON: the message, and each problem of a many-problem message alone.
nlohmann::json error_json(std::string_view message) {
  nlohmann::json problems = nlohmann::json::array();
  constexpr std::string_view kSeparator = "\n  ";
  auto first = message.find(kSeparator);
  if (message.starts_with("the plan has ") && first != std::string_view::npos) {
    for (auto rest = message.substr(first + kSeparator.size());;) {
      auto next = rest.find(kSeparator);
      problems.push_back(std::string(rest.substr(0, next)));
      if (next == std::string_view::npos) break;
      rest = rest.substr(next + kSeparator.size());
    }
  } else {
    problems.push_back(std::string(message));
  }
  return {{"valid", false}, {"error", std::string(message)}, {"problems", problems}};
}

int run_plan(const plan_options& o) {
  std::optional<launcher::plan::job_plan> made;
  // every input's mistake, the job file's and the flags' too, is JSON under --json
  try {
    auto [file, overrides] = split_job_args(o.args, "plan", "give one, then key=value overrides");
    auto loaded = load_job_config(file, overrides);
    launcher::plan::plan_request request;
    resolve_world(o, loaded.config, request);
    if (!o.gpu_memory.empty()) {
      request.memory.gpu_memory_bytes = parse_byte_size(o.gpu_memory, "--gpu-memory");
      request.gpu_memory_source = "--gpu-memory";
    }
    if (!o.reserve.empty()) request.memory.reserved_bytes = parse_byte_size(o.reserve, "--reserve");
    if (!o.engine.empty())
      request.memory.weights = launcher::plan::parse_weight_layout(o.engine, "--engine");
    made.emplace(launcher::plan::make_plan(loaded.config, loaded.where, request));
  } catch (const error& e) {
    if (o.json) fmt::print("{}\n", error_json(e.what()).dump(2));
    throw;
  }
  const auto& plan = *made;
  if (o.json) {
    fmt::print("{}\n", plan_json(plan).dump(2));
  } else {
    int sample = o.rank.value_or(plan.layout.world - 1);
    MUSTER_CHECK(sample >= 0 && sample < plan.layout.world, errc::invalid_input,
                 "plan: --rank {} is outside the {} ranks; use 0 to {}", sample,
                 plan.layout.world, plan.layout.world - 1);
    fmt::print("{}", plan_text(plan, sample));
  }
  return plan.fits() ? kExitOk : kExitNoFit;
}

// A whole number of at least 1, for counts of ranks and nodes.
const CLI::Validator kAtLeastOne(
    [](std::string& text) -> std::string {
      std::size_t used = 0;
      long long value = 0;
      try {
        value = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != text.size() || text.empty()) return "\"" + text + "\" is not a whole number";
      if (value < 1 || value > (1 << 20)) return text + " is out of range: use 1 to 1048576";
      return {};
    },
    "N", "at least one");

}  // namespace

void add_plan_verbs(CLI::App& app, verb_action& run) {
  auto o = std::make_shared<plan_options>();
  auto* verb = app.add_subcommand(
      "plan",
      "check a job's parallel layout, rank groups, batch arithmetic and per-GPU memory before "
      "any GPU is touched (exit 0 fits, 3 does not fit, 2 invalid)");
  verb->add_option("args", o->args, "JOB.toml and/or section.key=value overrides");
  verb->add_option("--world", o->world, "number of ranks (GPUs)")->check(kAtLeastOne);
  verb->add_option("--nodes", o->nodes, "number of nodes (with --gpus-per-node)")
      ->check(kAtLeastOne);
  verb->add_option("--gpus-per-node", o->gpus_per_node,
                   "ranks (GPUs) per node, for node placement (default: the Slurm job's; with --world, 8)")
      ->check(kAtLeastOne);
  verb->add_option("--gpu-memory", o->gpu_memory,
                   "memory of one GPU, e.g. 80GiB (H100) or 140GiB (H200: 143771 MiB; 141GB is SI, "
                   "131 GiB) (default: 80GiB)");
  verb->add_option("--reserve", o->reserve,
                   "memory kept for the CUDA context, NCCL and the allocator (default: 2GiB)");
  verb->add_option("--engine", o->engine,
                   "whose bf16 layout the memory counts: megatron (bf16 weights, an fp32 copy in "
                   "the optimizer: 18 bytes a parameter; the default) or muster-train (fp32 "
                   "weights under autocast: 16)");
  verb->add_option("--rank", o->rank, "the sample rank whose groups are shown (default: last)");
  verb->add_flag("--json", o->json, "print every detail as JSON (sizes in bytes)");
  verb->callback([o, &run] { run = [o] { return run_plan(*o); }; });
}

}  // namespace muster::cli
