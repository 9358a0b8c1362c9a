// `muster run` on one machine: see local_run.hpp.
#include "launcher/local_run.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <fstream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/run_dir.hpp"
#include "launcher/engine_precheck.hpp"
#include "launcher/launch_policy.hpp"
#include "launcher/local_gpus.hpp"
#include "launcher/master_port.hpp"
#include "launcher/node_run.hpp"
#include "launcher/plan/job_plan.hpp"
#include "launcher/worker_process.hpp"

namespace muster::launcher {

std::string short_hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string host(name);
  return host.substr(0, host.find('.'));
}

void write_job_file(const store::run_paths& paths, const job_config& config,
                    const plan::batch_plan& batch) {
  std::ofstream out(paths.job_config());
  // the steps this run takes, where global_batch_size derives them: the file stays the job's,
  // valid on another world
  out << with_grad_accum_note(
      to_toml(config, true), config,
      fmt::format("this run: {} = global_batch_size {} / (micro_batch_size {} x data parallel {})",
                  batch.grad_accum_steps, batch.global_batch_size, batch.micro_batch_size,
                  batch.global_batch_size / (batch.micro_batch_size * batch.grad_accum_steps)));
  out.close();
  MUSTER_CHECK(out.good(), errc::io, "cannot write {}; check that the disk is not full",
               paths.job_config().string());
}

std::vector<std::string> worker_argv(const std::vector<std::string>& command,
                                     const std::filesystem::path& default_worker,
                                     const env_map& env) {
  std::vector<std::string> argv = command;
  if (argv.empty()) argv = {default_worker.string()};
  auto path = env.find("PATH");
  find_executable(argv[0], path == env.end() ? "" : path->second);  // before any file
  return argv;
}

local_run_result run_local(const job_request& request) {
  auto loaded = load_job_config(request.job_file, request.overrides);
  const job_config& config = loaded.config;
  log::setup(config.log.level);
  node_run_plan plan;
  plan.config = &config;
  plan.num_gpus = count_local_gpus();
  plan.local_ranks = plan.world_size = local_ranks(config.launch.nproc, plan.num_gpus);
  plan::plan_request plan_request;
  plan_request.world =
      plan::world_size{plan.world_size, fmt::format("{} ranks on this machine", plan.world_size)};
  plan_request.gpus_per_node = plan.world_size;
  const auto planned = plan::make_plan(config, loaded.where, plan_request);  // or stop here
  const auto& layout = planned.layout;
  plan.base_env = process_env();
  store::run_paths paths(config.launch.runs_dir,
                         store::make_run_id(config.job.name, std::chrono::system_clock::now()));
  const daemon_step step{paths.run_id(), "0"};  // a local run is its job's one step
  plan.argv = worker_argv(request.command, request.default_worker, plan.base_env);
  check_engine_job(config, plan.argv);  // before any run directory
  plan.policy = decide_launch_policy(config, layout, plan.argv, plan.num_gpus, plan.base_env, step,
                                     paths.dir());
  plan.host = short_hostname();
  plan.master_addr = config.launch.master_addr.empty() ? "127.0.0.1" : config.launch.master_addr;
  plan.master_port = choose_master_port(config.launch.master_port);
  plan.console_fd = request.console_fd;

  paths.create();
  write_job_file(paths, config, planned.batch);
  record_step_start(step, paths.dir(), plan.local_ranks);
  auto result = run_node(plan, paths);
  record_step_end(step, result.exit_code);
  return {result.exit_code, paths.dir()};
}

}  // namespace muster::launcher
