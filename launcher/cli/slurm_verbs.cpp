// `muster slurm-step`: what muster reads from the Slurm step it runs in, checked, as text or
// JSON. Run it as `srun muster slurm-step` to see each task's view, or in a batch script.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "launcher/cli/verbs.hpp"
#include "launcher/slurm_step.hpp"

namespace muster::cli {
namespace {

nlohmann::json to_json(const launcher::slurm_step& s) {
  nlohmann::json j = {
      {"job_id", s.job_id},           {"nodelist", s.nodelist},
      {"nodes", s.nodes},             {"num_nodes", s.num_nodes},
      {"num_tasks", s.num_tasks},     {"tasks_per_node", s.tasks_per_node},
      {"proc_id", s.proc_id},         {"local_id", s.local_id},
      {"node_id", s.node_id},         {"this_node", s.this_node()},
      {"job_gpus", s.job_gpus},       {"step_gpus", s.step_gpus},
      {"submit_dir", s.submit_dir},   {"restart_count", s.restart_count},
  };
  auto optional = [&j](const char* key, const auto& value) {
    j[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  optional("step_id", s.step_id);
  optional("ntasks_per_node", s.ntasks_per_node);
  optional("visible_devices", s.visible_devices);
  optional("gpus_on_node", s.gpus_on_node);
  optional("cpus_on_node", s.cpus_on_node);
  optional("array_job_id", s.array_job_id);
  optional("array_task_id", s.array_task_id);
  return j;
}

void print_text(const launcher::slurm_step& s) {
  fmt::print("job        {}{}\n", s.job_id,
             s.array_job_id ? fmt::format(" (array {}_{})", *s.array_job_id, *s.array_task_id) : "");
  fmt::print("step       {}\n", s.step_id ? std::to_string(*s.step_id) : "batch script");
  fmt::print("nodes      {} ({})\n", s.nodelist, s.num_nodes);
  fmt::print("tasks      {} ({} per node)\n", s.num_tasks, fmt::join(s.tasks_per_node, ","));
  fmt::print("this task  proc {} local {} on node {} ({})\n", s.proc_id, s.local_id, s.node_id,
             s.this_node());
  fmt::print("gpus       job [{}] step [{}] CUDA_VISIBLE_DEVICES {}\n", fmt::join(s.job_gpus, ","),
             fmt::join(s.step_gpus, ","),
             s.visible_devices ? fmt::format("[{}]", fmt::join(*s.visible_devices, ",")) : "unset");
  fmt::print("restarts   {}\n", s.restart_count);
}

}  // namespace

void add_slurm_verbs(CLI::App& app, verb_action& run) {
  auto json = std::make_shared<bool>(false);
  auto* verb = app.add_subcommand(
      "slurm-step", "print the Slurm job step muster runs in, as read from SLURM_* variables");
  verb->add_flag("--json", *json, "print JSON");
  verb->callback([json, &run] {
    run = [json] {
      auto env = launcher::process_env();
      MUSTER_CHECK(launcher::inside_slurm(env), errc::environment,
                   "slurm-step: SLURM_JOB_ID is not set: this is not a Slurm job; run it inside "
                   "sbatch, salloc or srun");
      auto step = launcher::read_slurm_step(env);
      if (*json) fmt::print("{}\n", to_json(step).dump(2));
      else print_text(step);
      return kExitOk;
    };
  });
}

}  // namespace muster::cli
