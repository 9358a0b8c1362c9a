// `muster launch` inside an srun step: see slurm_launch.hpp.
#include "launcher/slurm_launch.hpp"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/run_dir.hpp"
#include "common/run_store.hpp"
#include "launcher/device_assignment.hpp"
#include "launcher/engine_precheck.hpp"
#include "launcher/launch_policy.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/local_gpus.hpp"
#include "launcher/local_run.hpp"
#include "launcher/master_port.hpp"
#include "launcher/node_run.hpp"
#include "launcher/plan/job_plan.hpp"
#include "launcher/rendezvous/node_group.hpp"
#include "launcher/rendezvous/store_address.hpp"
#include "launcher/slurm_requeue.hpp"
#include "launcher/slurm_time_limit.hpp"
#include "launcher/worker_env.hpp"
#include "launcher/worker_process.hpp"

namespace muster::launcher {
namespace {

using std::chrono::milliseconds;
namespace rdzv = rendezvous;

constexpr milliseconds kLeaveTimeout{10000};

// Blocks the signals the supervisor reads, before any thread starts, so that none of the
// store's threads takes one; pending ones wait for the supervisor (SIGUSR1 is forwarded then).
void block_launcher_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&mask, sig);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
}

// True once SIGTERM, SIGINT or SIGHUP is pending: the rendezvous gives up.
bool stop_signal_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  return sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT) ||
         sigismember(&pending, SIGHUP);
}

std::string run_id_of(const job_config& config, const slurm_step& step) {
  std::string name = config.job.name;
  if (step.array_job_id && step.array_task_id)
    return fmt::format("{}-{}_{}", name, *step.array_job_id, *step.array_task_id);
  return fmt::format("{}-{}", name, step.job_id);
}

std::string slurm_job_text(const slurm_step& step) {
  if (step.array_job_id && step.array_task_id)
    return fmt::format("{}_{}", *step.array_job_id, *step.array_task_id);
  return std::to_string(step.job_id);
}

// An array task's own job id (SLURM_JOB_ID), which slurm_job_text does not show.
std::optional<std::string> task_job_text(const slurm_step& step) {
  if (!step.array_job_id) return std::nullopt;
  return std::to_string(step.job_id);
}

// GPUs the node's launcher may use: Slurm's CUDA_VISIBLE_DEVICES when set, else its
// SLURM_GPUS_ON_NODE, else the device nodes.
int gpus_here(const slurm_step& step) {
  if (step.visible_devices) return static_cast<int>(step.visible_devices->size());
  if (step.gpus_on_node) return *step.gpus_on_node;
  return count_local_gpus();
}

// The member names for messages: one per node, or one per task ("gpu-a01 task 3").
std::vector<std::string> member_names(const slurm_step& step, bool per_task) {
  if (!per_task) return step.nodes;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < step.nodes.size(); ++i)
    for (int t = 0; t < step.tasks_per_node[i]; ++t)
      names.push_back(fmt::format("{} task {}", step.nodes[i], names.size()));
  return names;
}

// The rendezvous as one member sees it: the store hosted here (member 0) or found.
struct meeting {
  // The step's PMIx server (srun --mpi=pmix), kept until every member has joined: node 0's
  // published address stays readable that long.
  std::unique_ptr<rdzv::pmix_session> pmix;
  std::unique_ptr<rdzv::hosted_store> hosted;
  std::shared_ptr<rdzv::kv_store> store;
  std::string address;  // where the store is, for more connections
  int port = 0;
  std::string how;
};

// Member 0 hosts the store and puts MASTER_PORT in it (under "master_port", set before member 0
// joins, so every member reads it after the join); the others find it.
meeting meet(const job_config& config, const slurm_step& step, int member,
             const std::string& address, const store::run_paths& paths,
             std::chrono::steady_clock::time_point deadline) {
  const rdzv::store_identity identity{step.job_id, step.step_id.value_or(0), step.restart_count};
  const auto address_file = paths.dir() / fmt::format("rendezvous-step{}.addr", identity.step_id);
  meeting m;
  std::string no_pmix;
  m.pmix = rdzv::pmix_session::join_step(no_pmix);
  if (!m.pmix) log::get("launcher")->debug("rendezvous without PMIx: {}", no_pmix);
  if (member == 0) {
    m.hosted = std::make_unique<rdzv::hosted_store>(
        rdzv::host_store(identity, address, address_file, m.pmix.get()));
    m.store = m.hosted->server->store();
    m.store->set("master_port", std::to_string(choose_master_port(config.launch.master_port)));
    m.address = "127.0.0.1";
    m.port = m.hosted->port;
    m.how = m.hosted->derived ? "derived port" : "kernel-picked port";
    if (m.pmix) m.how += ", published through PMIx";
    log::get("launcher")->info("rendezvous store on {}:{} ({})", address, m.port, m.how);
    return m;
  }
  auto found = rdzv::find_store(identity, address, address_file, deadline, stop_signal_pending,
                                m.pmix.get());
  MUSTER_CHECK(!stop_signal_pending(), errc::io,
               "stopped by a signal while looking for node 0's rendezvous store at {} (not "
               "found yet): when node 0 gave up waiting for this node, check that {} resolves "
               "and is reachable from {}, or set launch.master_addr to an address of node 0 "
               "this node can reach",
               address, address, step.this_node().value_or("this node"));
  if (!found.client) {
    auto ports = rdzv::derived_ports(identity.job_id, identity.step_id);
    MUSTER_THROW(errc::environment,
                 "rendezvous: no rendezvous store of {} found within {} s: {}no address file {} "
                 "and no answer on {} ports {}-{}. Check that node 0's launcher ({}) is running "
                 "(its output), that {} resolves and is reachable from {} (or set "
                 "launch.master_addr), or raise launch.timeout_rendezvous",
                 identity.str(), config.launch.timeout_rendezvous,
                 m.pmix ? fmt::format("nothing from PMIx rank 0 of {}, ", m.pmix->nspace()) : "",
                 address_file.string(), address, ports.front(), ports.back(), step.nodes.front(),
                 address, step.this_node().value_or("this node"));
  }
  m.store = found.client;
  m.address = found.address;
  m.port = found.port;
  m.how = found.how;
  log::get("launcher")
      ->info("rendezvous store at {}:{} (found through {})", m.address, m.port, m.how);
  return m;
}

// One task per rank: meet, learn MASTER_PORT, exec the worker.
[[noreturn]] void exec_as_rank(const job_config& config, const slurm_step& step,
                               const std::vector<gpu_policy_decision>& policy,
                               const store::run_paths& paths, std::vector<std::string> argv,
                               const std::string& master_addr,
                               std::chrono::steady_clock::time_point deadline) {
  const int rank = step.proc_id;
  const int node = *step.node_id;
  const std::string host = *step.this_node();
  const int local_world = step.tasks_per_node[static_cast<std::size_t>(node)];
  auto m = meet(config, step, rank, master_addr, paths, deadline);
  rdzv::node_group group(m.store, rank, member_names(step, true));
  group.join({rank, host, 1, ::getpid()},
             std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()),
             stop_signal_pending);
  const int master_port = std::stoi(m.store->get("master_port", milliseconds(0)));
  group.leave(rank == 0, kLeaveTimeout);
  m.pmix.reset();    // finalized before the exec: the worker may be a PMIx client itself
  m.hosted.reset();  // the store is no longer needed: MASTER_PORT is known everywhere
  m.store.reset();

  env_map env = process_env();
  worker_identity who;
  who.rank = rank;
  who.local_rank = step.local_id;
  who.world_size = step.num_tasks;
  who.local_world_size = local_world;
  who.node_rank = node;
  who.num_nodes = step.num_nodes;
  who.master_addr = master_addr;
  who.master_port = master_port;
  who.run_id = paths.run_id();
  who.run_dir = std::filesystem::absolute(paths.dir());
  who.error_file = std::filesystem::absolute(paths.rank_error_file(rank));
  who.heartbeat_file = std::filesystem::absolute(paths.rank_heartbeat_file(rank));
  // no launcher copies it to the store: muster status reads it where the rank left it
  who.steps_file = std::filesystem::absolute(paths.rank_steps_file(rank));
  who.restart_count = step.restart_count;
  who.max_restarts = 0;
  who.cpus_on_node = step.cpus_on_node.value_or(1);
  // Slurm may show each task only its own GPU: leave that as it is; so does gpu_binding = node
  if (config.launch.gpu_binding == "rank" && step.visible_devices &&
      step.visible_devices->size() > 1)
    who.gpu =
        assign_gpus(local_world, step.visible_devices, 0)[static_cast<std::size_t>(step.local_id)];
  apply_gpu_policy(policy, env);
  env = worker_env(env, who);
  {
    store::node_writer db(paths.node_db(host));
    if (step.local_id == 0) {
      db.put_run({paths.run_id(), config.job.name, store::run_state::running, store::now_ms(),
                  store::now_ms(), step.num_tasks, step.num_nodes, slurm_job_text(step),
                  paths.job_config().string(), "", step.cluster_name, task_job_text(step)});
      for (const auto& d : policy)
        db.add_event(
            {store::now_ms(), std::nullopt, store::severity::info, "gpu_policy", describe(d)});
      // a requeue's start: status takes this attempt's steps from here on
      if (step.restart_count > 0)
        db.add_event(
            {store::now_ms(), std::nullopt, store::severity::warn, "resumed",
             fmt::format("start {} of this run (SLURM_RESTART_COUNT={}): resuming in {}",
                         step.restart_count + 1, step.restart_count, paths.dir().string())});
    }
    db.put_rank({rank, host, step.local_id, ::getpid(), store::rank_state::running, std::nullopt,
                 std::nullopt, store::now_ms()});
    db.add_event({store::now_ms(), rank, store::severity::info, "exec",
                  fmt::format("rank {} on {} execs {} (one task per rank: Slurm supervises it)",
                              rank, host, argv[0])});
  }
  auto path = env.find("PATH");
  auto program = find_executable(argv[0], path == env.end() ? "" : path->second);
  std::vector<std::string> env_text;
  for (const auto& [k, v] : env) env_text.push_back(k + "=" + v);
  std::vector<char*> c_argv, c_env;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  for (auto& e : env_text) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the worker starts with no signal blocked
  ::execve(program.c_str(), c_argv.data(), c_env.data());
  MUSTER_THROW(errc::io, "rank {}: cannot run {}: {}", rank, program.string(),
               std::strerror(errno));
}

// The job's time limit as Slurm holds it, however it was set, for diagnose's advice
// (launcher_lines.hpp); nothing when squeue does not say.
void record_time_limit(const store::run_paths& paths, const std::string& host,
                       const slurm_step& step) {
  const auto limit = ask_job_time_limit(slurm_job_text(step));
  if (!limit) return;
  store::node_writer db(paths.node_db(host));
  db.add_event({store::now_ms(), std::nullopt, store::severity::info, "time_limit",
                fmt::format("{}{} (squeue)", kTimeLimitSaid, *limit)});
}

}  // namespace

int run_slurm_launch(const job_request& request) {
  const auto started_ms = store::now_ms();  // this start's steps are the ones reported after it
  auto loaded = load_job_config(request.job_file, request.overrides);
  const job_config& config = loaded.config;
  log::setup(config.log.level);
  env_map env = process_env();
  MUSTER_CHECK(inside_slurm(env), errc::environment,
               "muster launch runs inside a Slurm job step (SLURM_JOB_ID is not set): "
               "srun --ntasks-per-node=1 muster launch job.toml; on one machine use muster run");
  const slurm_step step = read_slurm_step(env);
  MUSTER_CHECK(step.in_step() && step.node_id, errc::environment,
               "muster launch runs as an srun task, not in the batch script or salloc's shell: "
               "srun --ntasks-per-node=1 muster launch job.toml");
  const bool per_task = std::any_of(step.tasks_per_node.begin(), step.tasks_per_node.end(),
                                    [](int t) { return t > 1; });
  const int node = *step.node_id;
  const std::string host = *step.this_node();
  const std::string master_addr =
      config.launch.master_addr.empty() ? step.nodes.front() : config.launch.master_addr;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(config.launch.timeout_rendezvous);

  // Plan before anything is written or anyone is waited for: a bad layout fails at once on
  // every node alike.
  const int num_gpus = gpus_here(step);
  const int local = per_task ? step.tasks_per_node[static_cast<std::size_t>(node)]
                             : local_ranks(config.launch.nproc, num_gpus);
  const int world = per_task ? step.num_tasks : local * step.num_nodes;
  if (!per_task && config.launch.nproc > 0 && num_gpus > 0)
    MUSTER_CHECK(local <= num_gpus, errc::invalid_input,
                 "launch.nproc = {} but {} has {} GPU(s) in this step; use launch.nproc = {} or "
                 "fewer (0 = one per GPU)",
                 local, host, num_gpus, num_gpus);
  plan::plan_request plan_request;
  plan_request.world =
      plan::world_size{world, per_task ? fmt::format("{} Slurm tasks", world)
                                       : fmt::format("{} nodes x {} ranks", step.num_nodes, local)};
  plan_request.gpus_per_node = local;
  const auto planned = plan::make_plan(config, loaded.where, plan_request);
  const auto& layout = planned.layout;
  store::run_paths paths(config.launch.runs_dir, run_id_of(config, step));
  const daemon_step recorded{slurm_job_text(step),
                             step.step_id ? std::to_string(*step.step_id) : "batch"};
  auto argv = worker_argv(request.command, request.default_worker, env);
  check_engine_job(config, argv);  // before any run directory
  const auto policy =
      decide_launch_policy(config, layout, argv, num_gpus, env, recorded, paths.dir());

  paths.create();
  block_launcher_signals();
  // what the run records once, by its first task
  if (per_task ? step.proc_id == 0 : node == 0) {
    write_job_file(paths, config, planned.batch);
    record_time_limit(paths, host, step);
  }
  if (per_task) exec_as_rank(config, step, policy, paths, argv, master_addr, deadline);
  fmt::print(stderr, "{}\n",
             node_start_line(node, step.num_nodes, host, node * local, local, world, paths.dir()));

  auto m = meet(config, step, node, master_addr, paths, deadline);
  rdzv::node_group group(m.store, node, step.nodes);
  auto facts =
      group.join({node, host, local, ::getpid()},
                 std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                               deadline - std::chrono::steady_clock::now())),
                 stop_signal_pending);
  m.pmix.reset();  // every node has found the store
  for (const auto& f : facts)
    MUSTER_CHECK(f.local_ranks == local, errc::invalid_input,
                 "{} starts {} ranks but {} starts {}: every node must start the same number; set "
                 "launch.nproc, or ask Slurm for the same GPUs on every node",
                 f.host, f.local_ranks, host, local);

  node_run_plan plan;
  plan.config = &config;
  plan.policy = policy;
  plan.local_ranks = local;
  plan.first_rank = node * local;
  plan.world_size = world;
  plan.node_rank = node;
  plan.num_nodes = step.num_nodes;
  plan.host = host;
  plan.master_addr = master_addr;
  plan.master_port = std::stoi(m.store->get("master_port", milliseconds(0)));
  plan.slurm_job_id = slurm_job_text(step);
  plan.slurm_cluster = step.cluster_name;
  plan.slurm_task_job_id = task_job_text(step);
  plan.argv = argv;
  plan.base_env = env;
  plan.num_gpus = num_gpus;
  plan.restart_base = step.restart_count;
  plan.console_fd = request.console_fd;
  plan.slurm_signals_workers = true;
  plan.rendezvous = fmt::format("{} nodes met through the store on {}:{} ({}); MASTER_PORT {}",
                                step.num_nodes, master_addr, m.port, m.how, plan.master_port);
  node_run_group run_group;
  run_group.group = &group;
  run_group.watch = [&](int round) {
    auto client = rdzv::connect_store(m.address, m.port);
    return std::make_unique<rdzv::failure_watch>(
        client, [client] { client->shutdown(); }, round);
  };
  record_step_start(recorded, paths.dir(), local);
  auto result = run_node(plan, paths, run_group);
  record_step_end(recorded, result.exit_code);
  try {
    group.leave(node == 0, kLeaveTimeout);
  } catch (const error&) {
    // node 0's store is gone already; this node has nothing more to say to it
  }

  if (node == 0 && config.launch.requeue_on_signal && result.requeue_asked) {
    store::node_writer db(paths.node_db(host));
    std::optional<std::string> in_vain;
    try {
      in_vain = requeue_in_vain(read_requeue_history(paths, started_ms));
    } catch (const error& e) {
      // the store cannot say: requeued as asked, as for a program that reports nothing
      log::get("launcher")
          ->warn("requeue: the run's history could not be read ({}); requeueing", e.what());
    }
    if (in_vain) {
      // a requeue that would only train the same steps again (and again): the job ends here
      const auto what = fmt::format("not requeueing job {} after {}: {}", slurm_job_text(step),
                                    *result.requeue_asked, *in_vain);
      db.add_event(
          {store::now_ms(), std::nullopt, store::severity::error, "requeue_refused", what});
      fmt::print(stderr, "muster: {}\n", what);
      return result.exit_code != 0 ? result.exit_code : 1;
    }
    const auto requeued = requeue_job(slurm_job_text(step));
    // "requeued job 11 after SIGUSR1, seen first on gpu-a02 (scontrol requeue: ok)"
    const auto what = fmt::format("{} job {} after {} (scontrol requeue: {})",
                                  requeued.ok ? "requeued" : "could not requeue",
                                  slurm_job_text(step), *result.requeue_asked, requeued.message);
    db.add_event({store::now_ms(), std::nullopt,
                  requeued.ok ? store::severity::warn : store::severity::error, "requeue", what});
    fmt::print(stderr, "muster: {}\n", what);
  }
  return result.exit_code;
}

}  // namespace muster::launcher
