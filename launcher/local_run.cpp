// `muster run` on one machine: see local_run.hpp.
#include "launcher/local_run.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "common/gpu_policy.hpp"
#include "common/log.hpp"
#include "common/run_dir.hpp"
#include "common/run_store.hpp"
#include "launcher/device_assignment.hpp"
#include "launcher/local_gpus.hpp"
#include "launcher/plan/job_plan.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/worker_env.hpp"

namespace muster::launcher {
namespace {

// A port on 127.0.0.1 that was free a moment ago: the kernel picks it (bind to port 0), so
// nothing is guessed; rank 0's store binds it next.
int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  MUSTER_CHECK(fd >= 0, errc::io, "socket: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int err = errno;
  ::close(fd);
  MUSTER_CHECK(ok, errc::io, "cannot find a free port on 127.0.0.1: {}", std::strerror(err));
  return ntohs(addr.sin_port);
}

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string host(name);
  return host.substr(0, host.find('.'));
}

// The message of a torchelastic error file ({"message": {"message": ...}} or {"message": ...}).
std::optional<std::string> read_error_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return text.str().substr(0, 2000);
  auto message = json.value("message", nlohmann::json());
  if (message.is_object()) message = message.value("message", nlohmann::json());
  return message.is_string() ? message.get<std::string>() : json.dump();
}

std::filesystem::path heartbeat_file(const store::run_paths& paths, int rank) {
  return paths.logs_dir() / fmt::format("rank-{}.heartbeat", rank);
}

// "rank 2: exit code 3", for the restart event.
std::string describe_failure(const supervise_result& result) {
  for (const auto& x : result.exits)
    if (x.first_failure || x.failed()) return fmt::format("rank {}: {}", x.rank, x.describe());
  return "a failure";
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

tee_mode parse_tee(const std::string& tee) {
  return tee == "all" ? tee_mode::all : tee == "none" ? tee_mode::none : tee_mode::rank0;
}

// Records what the supervisor reports, and remembers what the summary needs.
class run_recorder {
 public:
  run_recorder(store::node_writer& db, const store::run_paths& paths, std::string host)
      : db_(db), paths_(paths), host_(std::move(host)) {}

  void operator()(const supervisor_event& e) {
    using kind = supervisor_event::kind;
    switch (e.what) {
      case kind::started:
        put_rank(e.rank, e.pid, store::rank_state::running, nullptr);
        break;
      case kind::exited:
        on_exit(*e.exit);
        break;
      case kind::forwarded_signal:
        event(std::nullopt, store::severity::info, "signal_forwarded",
              fmt::format("{} forwarded to every worker", signal_name(e.signal)));
        break;
      case kind::stopping:
        event(std::nullopt, store::severity::warn, "launcher_signal",
              fmt::format("the launcher got {}: stopping the workers", signal_name(e.signal)));
        break;
      case kind::killing:
        event(std::nullopt, store::severity::warn, "kill",
              "workers still running after the grace period: SIGKILL");
        break;
      case kind::hung:
      {
        auto text = fmt::format("rank {} is hung: {} sent; {}", e.rank, signal_name(e.signal),
                                e.detail);
        fmt::print(stderr, "muster: {}\n", text);
        event(e.rank, store::severity::error, "hang", std::move(text));
      }
        break;
      case kind::leftovers_killed:
        event(std::nullopt, store::severity::warn, "leftovers_killed",
              "processes left behind by the workers were killed");
        break;
    }
  }

 private:
  void put_rank(int rank, pid_t pid, store::rank_state state, const rank_exit* exit) {
    store::rank_record r;
    r.rank = rank;
    r.host = host_;
    r.local_rank = rank;
    r.pid = pid;
    r.state = state;
    if (exit && exit->exit_code) r.exit_code = *exit->exit_code;
    if (exit && exit->signal) r.signal = *exit->signal;
    r.updated_ms = store::now_ms();
    db_.put_rank(r);
  }

  void event(std::optional<int> rank, store::severity level, std::string kind, std::string text) {
    db_.add_event({store::now_ms(), rank ? std::optional<std::int64_t>(*rank) : std::nullopt,
                   level, std::move(kind), std::move(text)});
  }

  void on_exit(const rank_exit& x) {
    auto state = !x.failed()  ? store::rank_state::succeeded
                 : x.knock_on ? store::rank_state::killed
                              : store::rank_state::failed;
    put_rank(x.rank, x.pid, state, &x);
    if (x.first_failure) {
      first_error_ = read_error_file(error_file(x.rank));
      const auto& error = first_error_;
      std::string text = fmt::format("rank {} on {} (pid {}) failed first: {}", x.rank, host_,
                                     x.pid, x.describe());
      if (error) text += fmt::format("; error file: {}", *error);
      if (!x.last_lines.empty())
        text += fmt::format("; last output: {}", fmt::join(x.last_lines, " | "));
      event(x.rank, store::severity::error, "first_failure", text);
    } else if (x.knock_on) {
      event(x.rank, store::severity::info, "knock_on",
            fmt::format("rank {} stopped after the first failure: {}", x.rank, x.describe()));
    } else {
      event(x.rank, x.failed() ? store::severity::error : store::severity::info, "rank_exit",
            fmt::format("rank {}: {}", x.rank, x.describe()));
    }
  }

 public:
  std::filesystem::path error_file(int rank) const {
    return paths_.logs_dir() / fmt::format("rank-{}.error.json", rank);
  }
  // The error file of the latest first failure, as read when it was recorded.
  const std::optional<std::string>& first_error() const { return first_error_; }

 private:
  store::node_writer& db_;
  const store::run_paths& paths_;
  std::string host_;
  std::optional<std::string> first_error_;
};

void print_summary(const supervise_result& result, const store::run_paths& paths,
                   const run_recorder& recorder) {
  if (!result.first_failure) {
    if (result.launcher_signal)
      fmt::print(stderr, "muster: stopped by {}; logs in {}\n", signal_name(*result.launcher_signal),
                 paths.logs_dir().string());
    return;
  }
  const auto& x = result.exits[static_cast<std::size_t>(*result.first_failure)];
  fmt::print(stderr, "muster: rank {} failed first ({}); {} other rank(s) stopped. Log: {}\n",
             x.rank, x.describe(),
             std::count_if(result.exits.begin(), result.exits.end(),
                           [](const rank_exit& e) { return e.knock_on; }),
             paths.rank_log(x.rank).string());
  if (const auto& error = recorder.first_error())
    fmt::print(stderr, "muster: rank {} error file: {}\n", x.rank, *error);
  for (const auto& line : x.last_lines) fmt::print(stderr, "  [rank {}] {}\n", x.rank, line);
}

}  // namespace

local_run_result run_local(const local_run_request& request) {
  auto loaded = load_job_config(request.job_file, request.overrides);
  const job_config& config = loaded.config;
  log::setup(config.log.level);
  const int num_gpus = count_local_gpus();
  const int nproc = local_ranks(config.launch.nproc, num_gpus);
  plan::plan_request plan_request;
  plan_request.world = plan::world_size{nproc, fmt::format("{} ranks on this machine", nproc)};
  plan_request.gpus_per_node = nproc;
  auto layout = plan::make_plan(config, loaded.where, plan_request).layout;  // or stop here

  std::vector<std::string> argv = request.command;
  if (argv.empty()) argv = {request.default_worker.string()};
  auto base_env = process_env();
  auto visible = base_env.find("CUDA_VISIBLE_DEVICES");
  const auto gpus = assign_gpus(
      nproc,
      visible == base_env.end() ? std::nullopt
                                : std::optional(parse_visible_devices(visible->second)),
      num_gpus);
  const bool has_gpus = gpus.front().has_value();
  const auto cpus = split_cpus(allowed_cpus(), nproc);
  const auto policy = decide_gpu_policy(
      {layout.tp(), layout.cp(), config.parallel.sharding, config.comm.nccl_ub, base_env});
  apply_gpu_policy(policy, base_env);
  auto path = base_env.find("PATH");
  find_executable(argv[0], path == base_env.end() ? "" : path->second);  // before any file

  const std::string host = this_host();
  store::run_paths paths(config.launch.runs_dir,
                         store::make_run_id(config.job.name, std::chrono::system_clock::now()));
  paths.create();
  {
    std::ofstream out(paths.job_config());
    out << to_toml(config, true);
    MUSTER_CHECK(out.good(), errc::io, "cannot write {}; check the disk", paths.job_config().string());
  }
  store::node_writer db(paths.node_db(host));
  store::run_record run{paths.run_id(), config.job.name, store::run_state::running,
                        store::now_ms(), store::now_ms(), nproc, 1, std::nullopt,
                        paths.job_config().string(), ""};
  db.put_run(run);

  for (const auto& d : policy)
    db.add_event({store::now_ms(), std::nullopt, store::severity::info, "gpu_policy",
                  fmt::format("{}: {} {}: {}", d.rule, d.value ? "set" : "unset",
                              d.value ? d.variable + "=" + *d.value : d.variable, d.reason)});
  run_recorder recorder(db, paths, host);
  worker_identity who;
  who.world_size = who.local_world_size = nproc;
  who.max_restarts = config.launch.max_restarts;
  who.master_port = free_loopback_port();
  who.run_id = paths.run_id();
  who.run_dir = std::filesystem::absolute(paths.dir());
  who.cpus_on_node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The specs of every rank for restart `restart` (0 = the first start).
  auto make_specs = [&](int restart) {
    who.restart_count = restart;
    std::vector<worker_spec> specs;
    for (int rank = 0; rank < nproc; ++rank) {
      const auto index = static_cast<std::size_t>(rank);
      std::filesystem::remove(heartbeat_file(paths, rank));  // a restart starts unwatched
      who.rank = who.local_rank = rank;
      who.error_file = std::filesystem::absolute(recorder.error_file(rank));
      who.heartbeat_file = std::filesystem::absolute(heartbeat_file(paths, rank));
      who.gpu = gpus[index];
      // CPU shares only with GPUs, where a rank's CPUs should sit beside its GPU.
      specs.push_back({rank, argv, worker_env(base_env, who),
                       has_gpus ? cpus[index] : std::vector<int>{}});
    }
    return specs;
  };

  supervise_options options;
  options.kill_grace = std::chrono::seconds(config.launch.kill_grace);
  options.tee = parse_tee(config.launch.tee);
  options.console_fd = request.console_fd;
  options.log_path = [&paths](int rank) { return paths.rank_log(rank); };
  options.on_event = [&recorder](const supervisor_event& e) { recorder(e); };
  options.timeout_hang = std::chrono::seconds(config.launch.timeout_hang);
  options.heartbeat_path = [&paths](int rank) { return heartbeat_file(paths, rank); };
  options.hang_signal = config.launch.hang_dump ? SIGABRT : SIGTERM;
  log::get("launcher")->info("run {}: {} ranks of {} in {}", paths.run_id(), nproc, argv[0],
                             paths.dir().string());
  auto result = supervise(make_specs(0), options);
  for (int restart = 1; restart <= config.launch.max_restarts && result.exit_code() != 0 &&
                        !result.launcher_signal;
       ++restart) {
    print_summary(result, paths, recorder);
    db.add_event({store::now_ms(), std::nullopt, store::severity::warn, "restart",
                  fmt::format("restart {} of {} after {}", restart, config.launch.max_restarts,
                              describe_failure(result))});
    fmt::print(stderr, "muster: restarting the ranks ({} of {})\n", restart,
               config.launch.max_restarts);
    result = supervise(make_specs(restart), options);
  }

  auto state = result.first_failure     ? store::run_state::failed
               : result.launcher_signal ? store::run_state::cancelled
               : result.exit_code() != 0 ? store::run_state::failed
                                         : store::run_state::succeeded;
  db.set_run_state(paths.run_id(), state, store::now_ms());
  print_summary(result, paths, recorder);
  return {result.exit_code(), paths.dir()};
}

}  // namespace muster::launcher
