// One node's ranks, alone or in a group of nodes: see node_run.hpp.
#include "launcher/node_run.hpp"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.hpp"
#include "common/gpu_policy.hpp"
#include "common/launcher_lock.hpp"
#include "common/log.hpp"
#include "common/run_store.hpp"
#include "launcher/device_assignment.hpp"
#include "launcher/heartbeat.hpp"
#include "launcher/launch_policy.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/run_recorder.hpp"
#include "launcher/step_collector.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/worker_env.hpp"

namespace muster::launcher {
namespace {

// A terminal that can redraw a line in place: the progress line goes there.
bool console_is_terminal(int fd) {
  const char* term = std::getenv("TERM");
  return ::isatty(fd) == 1 && !(term && std::string_view(term) == "dumb");
}

// The CPUs this launcher may run on, ascending.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

// The name of a process (/proc/PID/comm), "" when it cannot be read.
std::string process_name(pid_t pid) {
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(comm, name);
  return name;
}

// What the other nodes are told when this node's launcher vanishes mid-round (its last word).
rendezvous::group_failure vanished(const node_run_plan& plan) {
  rendezvous::group_failure f;
  f.node = plan.node_rank;
  f.host = plan.host;
  f.exit_code = 1;
  f.what = fmt::format(
      "the launcher on {} (node {}{} store closed while its ranks ran (killed, or {} went "
      "down); its ranks ended with it. See {}'s output and `dmesg` there for why",
      plan.host, plan.node_rank, kLauncherGone, plan.host, plan.host);
  f.no_restart = true;  // that node's part of the job is gone: a restart cannot bring it back
  return f;
}

tee_mode parse_tee(const std::string& tee) {
  return tee == "all" ? tee_mode::all : tee == "none" ? tee_mode::none : tee_mode::rank0;
}

// This node's first failure of a round, for the group.
rendezvous::group_failure local_failure(const node_run_plan& plan, const supervise_result& result,
                                        const run_recorder& recorder) {
  rendezvous::group_failure f;
  f.node = plan.node_rank;
  f.host = plan.host;
  f.exit_code = result.exit_code();
  if (result.first_failure) {
    const auto& x = result.exits[static_cast<std::size_t>(*result.first_failure)];
    f.rank = x.rank;
    f.what = fmt::format("rank {} on {}{}: {}", x.rank, plan.host, kFailedFirst, x.describe());
    if (const auto& error = recorder.first_error()) f.what += "; error file: " + *error;
  } else {
    f.no_restart = result.launcher_signal.has_value();
    f.what = result.launcher_signal ? fmt::format("the launcher on {} was stopped by {}", plan.host,
                                                  signal_name(*result.launcher_signal))
                                    : fmt::format("a rank on {} failed", plan.host);
  }
  return f;
}

}  // namespace

node_run_result run_node(const node_run_plan& plan, const store::run_paths& paths,
                         const node_run_group& group) {
  const job_config& config = *plan.config;
  const int n = plan.local_ranks;
  env_map base_env = plan.base_env;
  auto visible = base_env.find("CUDA_VISIBLE_DEVICES");
  const auto gpus =
      assign_gpus(n,
                  visible == base_env.end() ? std::nullopt
                                            : std::optional(parse_visible_devices(visible->second)),
                  plan.num_gpus);
  const bool has_gpus = gpus.front().has_value();
  const auto allowed = allowed_cpus();
  const auto cpus = split_cpus(allowed, n);
  const auto& policy = plan.policy;
  apply_gpu_policy(policy, base_env);

  // held until this launcher ends, however it ends: status reads it as "a launcher is alive"
  const store::launcher_lock alive(paths.launcher_lock(plan.host));
  store::node_writer db(paths.node_db(plan.host));
  db.put_run({paths.run_id(), config.job.name, store::run_state::running, store::now_ms(),
              store::now_ms(), plan.world_size, plan.num_nodes, plan.slurm_job_id,
              paths.job_config().string(), "", plan.slurm_cluster, plan.slurm_task_job_id});
  run_recorder recorder(db, paths, plan.host, plan.first_rank);
  if (plan.restart_base > 0)
    recorder.event(std::nullopt, store::severity::warn, "resumed",
                   fmt::format("start {} of this run (SLURM_RESTART_COUNT={}): resuming in {}",
                               plan.restart_base + 1, plan.restart_base, paths.dir().string()));
  recorder.event(std::nullopt, store::severity::info, "program",
                 fmt::format("{}{}", kProgramSaid, plan.argv.front()));
  if (!plan.rendezvous.empty())
    recorder.event(std::nullopt, store::severity::info, "rendezvous", plan.rendezvous);
  for (const auto& d : policy)
    recorder.event(std::nullopt, store::severity::info, "gpu_policy", describe(d));
  // where it matters: ranks with GPUs to feed, or a Slurm task given too few (a local CPU run of
  // more ranks than cores is asked for as it is)
  if (!allowed.empty() && static_cast<int>(allowed.size()) < n && (has_gpus || plan.slurm_job_id)) {
    const auto text = fmt::format(
        "{} CPU(s) for {} ranks on {} (this launcher's affinity{}): the ranks share them, and "
        "each waits on the others for its data loading and kernel launches; ask for more "
        "(slurm.cpus_per_task, srun/sbatch --cpus-per-task, or --exclusive)",
        allowed.size(), n, plan.host, plan.slurm_job_id ? ", its Slurm task's CPUs" : "");
    fmt::print(stderr, "muster: warning: {}\n", text);
    recorder.event(std::nullopt, store::severity::warn, "cpus", text);
  }
  std::vector<std::string> assigned;
  for (int i = 0; i < n && has_gpus; ++i)
    assigned.push_back(fmt::format("rank {} GPU {}", plan.first_rank + i, *gpus[i]));
  recorder.event(
      std::nullopt, store::severity::info, "devices",
      !has_gpus ? std::string(kNoGpuSaid)
      : config.launch.gpu_binding == "rank"
          ? fmt::format("each rank sees its GPU alone (CUDA_VISIBLE_DEVICES): {}",
                        fmt::join(assigned, ", "))
          : fmt::format("the ranks see the node's GPUs and take theirs by LOCAL_RANK: {}",
                        fmt::join(assigned, ", ")));

  worker_identity who;
  who.world_size = plan.world_size;
  who.local_world_size = n;
  who.node_rank = plan.node_rank;
  who.num_nodes = plan.num_nodes;
  who.max_restarts = config.launch.max_restarts;
  who.master_addr = plan.master_addr;
  who.master_port = plan.master_port;
  who.run_id = paths.run_id();
  who.run_dir = std::filesystem::absolute(paths.dir());
  who.cpus_on_node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  who.python_stacks = config.launch.hang_dump;
  auto make_specs = [&](int restart) {
    who.restart_count = restart;
    std::vector<worker_spec> specs;
    for (int local = 0; local < n; ++local) {
      const auto index = static_cast<std::size_t>(local);
      const int rank = plan.first_rank + local;
      std::filesystem::remove(paths.rank_heartbeat_file(rank));  // a restart starts unwatched
      who.rank = rank;
      who.local_rank = local;
      who.shares_slurm_task = true;  // every rank of this node under this launcher's task
      who.error_file = std::filesystem::absolute(paths.rank_error_file(rank));
      who.heartbeat_file = std::filesystem::absolute(paths.rank_heartbeat_file(rank));
      who.steps_file = std::filesystem::absolute(paths.rank_steps_file(rank));
      // launch.gpu_binding = "node": the node's GPUs as they are, picked by LOCAL_RANK
      if (config.launch.gpu_binding == "rank") who.gpu = gpus[index];
      // CPU shares only with GPUs, where a rank's CPUs should sit beside its GPU.
      specs.push_back({rank, plan.argv, worker_env(base_env, who),
                       has_gpus ? cpus[index] : std::vector<int>{}});
    }
    return specs;
  };

  auto* g = group.group;
  int round = 0;
  supervise_options options;
  options.kill_grace = std::chrono::seconds(config.launch.kill_grace);
  options.tee = parse_tee(config.launch.tee);
  options.console_fd = plan.console_fd;
  options.log_path = [&paths](int rank) { return paths.rank_log(rank); };
  options.on_event = [&](const supervisor_event& e) {
    recorder(e);
    if (g && e.what == supervisor_event::kind::forwarded_signal && config.launch.requeue_on_signal)
      g->ask_requeue(fmt::format("{}, seen first on {}", signal_name(e.signal), plan.host));
  };
  const int hang_s = hang_timeout_s(config, plan.argv);
  options.timeout_hang = std::chrono::seconds(hang_s);
  if (hang_s != config.launch.timeout_hang)
    recorder.event(std::nullopt, store::severity::info, "hang_timeout",
                   fmt::format("launch.timeout_hang = {} s is taken as {} s for muster-train, "
                               "past comm.timeout = {} s: its collective timeouts, which name "
                               "the ranks that never arrived, come first",
                               config.launch.timeout_hang, hang_s, config.comm.timeout));
  options.heartbeat_path = [&paths](int rank) { return paths.rank_heartbeat_file(rank); };
  options.error_path = [&paths](int rank) { return paths.rank_error_file(rank); };
  options.hang_signal = config.launch.hang_dump ? SIGABRT : SIGTERM;
  options.progress_line = console_is_terminal(plan.console_fd);
  std::vector<int> ranks(static_cast<std::size_t>(n));
  std::iota(ranks.begin(), ranks.end(), plan.first_rank);
  // the steps rank 0 had done at its first report of this start (its steps file's line, else its
  // heartbeat), said once: node 0 compares it with the start before it before it asks for a
  // requeue (slurm_requeue.hpp). The steps file holds every start's lines: this one's only.
  const auto started_ms = store::now_ms();
  bool first_step_said = plan.first_rank != 0;  // rank 0 is this node's
  const auto say_first_step = [&](std::int64_t step, const char* from) {
    if (first_step_said) return;
    first_step_said = true;
    recorder.event(0, store::severity::info, "first_step",
                   fmt::format("{}{} steps at its first report of this start (its {})",
                               kFirstStepSaid, step, from));
  };
  step_collector steps(
      ranks, [&paths](int rank) { return paths.rank_steps_file(rank); },
      [&](const std::vector<store::step_record>& batch) {
        recorder.steps(batch);
        for (const auto& s : batch)
          if (s.rank == 0 && s.time_ms >= started_ms) say_first_step(s.step, "steps file");
      });
  options.on_tick = [&] {
    steps.collect();
    if (first_step_said) return;
    if (const auto beat = read_heartbeat(paths.rank_heartbeat_file(0)); beat && beat->progress.step)
      say_first_step(*beat->progress.step, "heartbeat");
  };
  if (plan.slurm_signals_workers)
    options.workers_got_it = [](pid_t sender) { return process_name(sender) == "slurmstepd"; };
  options.stop_reason = [&]() -> std::string {
    try {
      if (auto f = g->failure(round)) return f->what;
    } catch (const error&) {
    }
    return fmt::format("lost the rendezvous store on {} (node 0's launcher ended)",
                       plan.master_addr);
  };
  log::get("launcher")
      ->info("run {}: ranks {}-{} of {} on {}: {}", paths.run_id(), plan.first_rank,
             plan.first_rank + n - 1, plan.world_size, plan.host, plan.argv[0]);

  node_run_result out;
  supervise_result result;
  std::optional<rendezvous::group_failure> failure;
  for (;; ++round) {
    std::unique_ptr<rendezvous::failure_watch> watch;
    if (g) {
      g->set_last_word(round, vanished(plan));
      watch = group.watch(round);
    }
    options.stop_fd = watch ? watch->fd() : -1;
    result = supervise(make_specs(plan.restart_base + round), options);
    steps.collect();  // what the workers wrote last
    if (watch) watch->stop();
    // Ranks stopped on a passed-on signal (the pre-timeout checkpoint) end the run here: no
    // failure for the other nodes (their ranks stop on the same signal), no restart.
    const bool local =
        result.first_failure || result.launcher_signal ||
        (!result.stop_requested && !result.stopped_as_asked() && result.exit_code() != 0);
    failure.reset();
    if (local) failure = local_failure(plan, result, recorder);
    if (g) {
      try {
        if (local) failure = g->publish_failure(round, *failure);
        // After a failure every node ends within its grace; without one, whenever it is done.
        std::optional<std::chrono::milliseconds> wait;
        if (local || result.stop_requested)
          wait = std::chrono::milliseconds(options.kill_grace) + std::chrono::seconds(30);
        g->end_round(round, result.exit_code(), wait);
        failure = g->failure(round);  // a node may have failed after this one was done
        if (failure && failure->node != plan.node_rank)
          recorder.event(failure->rank >= 0 ? std::optional<int>(failure->rank) : std::nullopt,
                         store::severity::error, "first_failure_elsewhere", failure->what);
      } catch (const error& e) {
        if (e.category() != errc::io && e.category() != errc::environment) throw;
        // Node 0's launcher is gone, or a node never reported: nothing more to agree on.
        if (!failure) {
          failure.emplace();
          failure->node = -1;
          failure->exit_code = result.exit_code() != 0 ? result.exit_code() : 1;
          failure->what = fmt::format("lost the other launchers: {}", e.what());
        }
        failure->no_restart = true;
        g = nullptr;
        recorder.event(std::nullopt, store::severity::error, "rendezvous_lost", e.what());
      }
    }
    if (!failure || failure->no_restart || round >= config.launch.max_restarts) break;
    print_summary(result, paths, recorder,
                  failure->node != plan.node_rank ? std::optional(failure->what) : std::nullopt);
    recorder.event(std::nullopt, store::severity::warn, "restart",
                   fmt::format("restart {} of {} after {}", round + 1, config.launch.max_restarts,
                               failure->what));
    fmt::print(stderr, "muster: restarting the ranks ({} of {})\n", round + 1,
               config.launch.max_restarts);
    // each rank's log goes on with the next attempt's output: said where it starts (the
    // failure is the launcher's and the store's to say: a log's line of it would be read as
    // this rank's)
    for (int rank = plan.first_rank; rank < plan.first_rank + n; ++rank)
      std::ofstream(paths.rank_log(rank), std::ios::app) << fmt::format(
          "muster: restarting the ranks ({} of {}); the next attempt's output "
          "follows\n",
          round + 1, config.launch.max_restarts);
  }
  try {
    if (g) out.requeue_asked = g->requeue_asked();
  } catch (const error&) {
    // the store went away after the last round: no requeue to ask for
  }

  out.exit_code = failure ? failure->exit_code : result.exit_code();
  auto state = !failure                 ? store::run_state::succeeded
               : result.launcher_signal ? store::run_state::cancelled
                                        : store::run_state::failed;
  if (failure && failure->no_restart && !result.launcher_signal)
    state = store::run_state::cancelled;  // another node's launcher was stopped
  if (!failure && result.stopped_as_asked()) state = store::run_state::cancelled;
  recorder.set_state(paths.run_id(), state);
  // a launcher signalled itself (scancel reaches every node's) says its own stop, not whichever
  // other node's was published first
  print_summary(result, paths, recorder,
                failure && failure->node != plan.node_rank && !result.launcher_signal
                    ? std::optional(failure->what)
                    : std::nullopt);
  return out;
}

}  // namespace muster::launcher
