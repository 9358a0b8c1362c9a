// `muster slurm-step`: what muster reads from the Slurm step it runs in, checked, as text or
// JSON. Run it as `srun muster slurm-step` to see each task's view, or in a batch script or an
// salloc shell to see the job's. The checks and their messages are read_slurm_step's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "launcher/cli/verbs.hpp"
#include "launcher/slurm_step.hpp"

namespace muster::cli {
namespace {

nlohmann::json to_json(const launcher::slurm_step& s) {
  nlohmann::json j = {
      {"job_id", s.job_id},         {"nodelist", s.nodelist},
      {"nodes", s.nodes},           {"num_nodes", s.num_nodes},
      {"num_tasks", s.num_tasks},   {"tasks_per_node", s.tasks_per_node},
      {"proc_id", s.proc_id},       {"local_id", s.local_id},
      {"job_gpus", s.job_gpus},     {"step_gpus", s.step_gpus},
      {"submit_dir", s.submit_dir}, {"restart_count", s.restart_count},
  };
  auto optional = [&j](const char* key, const auto& value) {
    j[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  optional("step_id", s.step_id);
  optional("node_id", s.node_id);  // null: not on a node of the allocation, or unknown
  optional("this_node", s.this_node());
  optional("node_name", s.node_name);
  optional("ntasks_per_node", s.ntasks_per_node);
  optional("visible_devices", s.visible_devices);
  optional("gpus_on_node", s.gpus_on_node);
  optional("cpus_on_node", s.cpus_on_node);
  optional("array_job_id", s.array_job_id);
  optional("array_task_id", s.array_task_id);
  return j;
}

void print_text(const launcher::slurm_step& s) {
  fmt::print(
      "job        {}{}\n", s.job_id,
      s.array_job_id ? fmt::format(" (array {}_{})", *s.array_job_id, *s.array_task_id) : "");
  fmt::print("step       {}\n", s.step_id ? std::to_string(*s.step_id)
                                          : "none: the job's layout (batch script, salloc "
                                            "shell, interactive or extern step)");
  fmt::print("nodes      {} ({})\n", s.nodelist, s.num_nodes);
  fmt::print("tasks      {} ({} per node)\n", s.num_tasks, fmt::join(s.tasks_per_node, ","));
  if (s.node_id)
    fmt::print("this task  proc {} local {} on node {} ({})\n", s.proc_id, s.local_id, *s.node_id,
               *s.this_node());
  else
    fmt::print("this task  not on a node of the job ({})\n",
               s.node_name ? fmt::format("SLURMD_NODENAME={} is not in the node list", *s.node_name)
                           : "SLURMD_NODENAME is not set, as in salloc's shell on the submit host");
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
      auto step = launcher::read_slurm_step(launcher::process_env());
      if (*json)
        fmt::print("{}\n", to_json(step).dump(2));
      else
        print_text(step);
      return kExitOk;
    };
  });
}

}  // namespace muster::cli
