// The SPANK plugin spank_muster.so in a real Slurm on loopback (tests/support/slurm_cluster.hpp)
// with a real musterd: what a plain `srun` task sees in its own environment, as the daemon's
// policy says; the node's record of the decisions; bad options; and a daemon that is not there
// or does not answer, with and without required=1.
// Skipped, with "SKIPPED: <reason>", where the cluster cannot run (not root, no Slurm).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/musterd_harness.hpp"
#include "tests/support/slurm_cluster.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using muster::test::process_result;
using muster::test::slurm_cluster;

namespace {

const std::string kPlugin = std::string(MUSTER_BIN_DIR) + "/../lib/spank_muster.so";

const char* kGpuNode = R"([node]
gpus = 8
compute_major = 9
interfaces = ["eth0", "ib0"]
ib_hcas = []
[slurm]
squeue = ""
)";

std::string plugstack(const std::string& args) {
  return "required " + kPlugin + " " + args + "\n";
}

// One task's environment, as `env -0` printed it (tasks of a step separated by srun --label).
using environment = std::map<std::string, std::string>;

// `srun [options] env` with `env_set` added to the test's environment (and `env_unset`
// removed); each task's environment, by task id.
struct step_envs {
  process_result result;
  std::map<int, environment> tasks;
};

step_envs srun_env(const slurm_cluster& cluster, std::vector<std::string> options,
                   const std::map<std::string, std::string>& env_set = {}) {
  auto env = cluster.env();
  for (const auto& [name, value] : env_set) env.set[name] = value;
  for (const char* name : {"CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_DEVICE_ORDER", "MUSTER_POLICY",
                           "CUDA_VISIBLE_DEVICES", "MUSTER_SPANK_POLICY"})
    if (!env_set.count(name)) env.unset.push_back(name);
  std::vector<std::string> argv = {slurm_cluster::program("srun"), "--label"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("/usr/bin/env");
  step_envs out{muster::test::run_process(argv, env), {}};
  std::istringstream lines(out.result.out);
  for (std::string line; std::getline(lines, line);) {
    // "0: NAME=value"
    const auto colon = line.find(": ");
    const auto eq = line.find('=', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || eq == std::string::npos) continue;
    out.tasks[std::stoi(line.substr(0, colon))][line.substr(colon + 2, eq - colon - 2)] =
        line.substr(eq + 1);
  }
  return out;
}

std::string value_of(const environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "(unset)" : it->second;
}

// A unix socket that takes connections (the kernel does, up to its backlog) and never answers.
struct silent_socket {
  muster::test::temp_dir dir{"silent-musterd"};
  std::string path = (dir / "musterd.sock").string();
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  silent_socket() {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::copy(path.begin(), path.end(), a.sun_path);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 64) == 0);
  }
  ~silent_socket() { ::close(fd); }
};

}  // namespace

TEST_CASE("the SPANK plugin gives a plain srun task musterd's policy, seen from inside the task",
          "[slurm][spank]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  REQUIRE(fs::exists(kPlugin));
  muster::test::running_daemon daemon({}, kGpuNode);
  muster::test::slurm_cluster_options options;
  options.plugstack = plugstack("socket=" + daemon.socket.string() + " timeout_ms=5000");
  slurm_cluster cluster(options);
  const auto job = std::to_string(cluster.first_job_id());

  // FSDP sharding: the user's CUDA_DEVICE_MAX_CONNECTIONS=1 is unset, the GPU rules set theirs,
  // on both nodes
  auto fsdp = srun_env(cluster, {"-N2", "--muster-policy=sharding=optim_grads_params"},
                       {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  INFO(fsdp.result.out << fsdp.result.err << cluster.log_tail());
  REQUIRE(fsdp.result.exit_code == 0);
  REQUIRE(fsdp.tasks.size() == 2);
  for (const auto& [task, env] : fsdp.tasks) {
    INFO("task " << task);
    CHECK(value_of(env, "CUDA_DEVICE_MAX_CONNECTIONS") == "(unset)");
    CHECK(value_of(env, "CUDA_DEVICE_ORDER") == "PCI_BUS_ID");
    CHECK(value_of(env, "NCCL_SOCKET_IFNAME") == "=ib0");
    CHECK(value_of(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
    CHECK_THAT(value_of(env, "MUSTER_SPANK_POLICY"),
               Catch::StartsWith("musterd: ") && Catch::EndsWith(" set, 1 unset"));
  }
  // each node records the step's decisions once (slurm_spank_user_init), under job and step;
  // here both nodes ask the same daemon
  muster::test::client c(daemon.socket);
  const auto recorded = c.ask(R"({"version":1,"request":"job","job":{"id":")" + job + "\"}}");
  INFO(recorded.dump());
  REQUIRE(recorded["ok"] == true);
  int unsets = 0;
  for (const auto& d : recorded["decisions"])
    unsets +=
        d["rule"] == "cuda-max-connections-fsdp" && d["action"] == "unset" && d["step"] == "0";
  CHECK(unsets == 2);

  // TP > 1 without sharding: CUDA_DEVICE_MAX_CONNECTIONS=1 is set; MUSTER_POLICY works as the
  // option does
  for (const auto& [option, env_set] :
       std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"--muster-policy=tp=2", {}}, {"--export=ALL", {{"MUSTER_POLICY", "tp=2,cp=1"}}}}) {
    auto tp = srun_env(cluster, {"-N1", option}, env_set);
    INFO(option << "\n" << tp.result.out << tp.result.err);
    REQUIRE(tp.result.exit_code == 0);
    CHECK(value_of(tp.tasks[0], "CUDA_DEVICE_MAX_CONNECTIONS") == "1");
  }

  // every task of a step gets the same environment (two per node here)
  auto four = srun_env(cluster, {"-N2", "--ntasks-per-node=2", "--muster-policy=tp=2"});
  INFO(four.result.err);
  REQUIRE(four.tasks.size() == 4);
  for (const auto& [task, env] : four.tasks) {
    INFO("task " << task);
    CHECK(value_of(env, "CUDA_DEVICE_MAX_CONNECTIONS") == "1");
    CHECK(value_of(env, "MUSTER_SPANK_POLICY") == value_of(four.tasks[0], "MUSTER_SPANK_POLICY"));
  }

  // a task that sees no GPU: the GPU rules stay quiet, the plugin still answered
  auto no_gpu = srun_env(cluster, {"-N1"}, {{"CUDA_VISIBLE_DEVICES", ""}});
  REQUIRE(no_gpu.result.exit_code == 0);
  CHECK(value_of(no_gpu.tasks[0], "CUDA_DEVICE_ORDER") == "(unset)");
  CHECK(value_of(no_gpu.tasks[0], "MUSTER_SPANK_POLICY") == "musterd: 0 set, 0 unset");

  // --muster-off: the environment as the user made it
  auto off = srun_env(cluster, {"-N1", "--muster-off"}, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  REQUIRE(off.result.exit_code == 0);
  CHECK(value_of(off.tasks[0], "CUDA_DEVICE_MAX_CONNECTIONS") == "1");
  CHECK(value_of(off.tasks[0], "CUDA_DEVICE_ORDER") == "(unset)");
  CHECK(value_of(off.tasks[0], "MUSTER_SPANK_POLICY") == "(unset)");

  // a combination the policy refuses: the task does not start, and says why
  auto refused = srun_env(cluster, {"-N1", "--muster-policy=nccl_ub,expandable_segments"});
  CHECK(refused.result.exit_code != 0);
  CHECK(refused.tasks.empty());
  CHECK_THAT(
      refused.result.err,
      Catch::Contains("the site's GPU policy refuses this step: nccl-ub-expandable-segments"));

  // a typo fails in srun, before any job exists
  auto typo = srun_env(cluster, {"-N1", "--muster-policy=tpp=2"});
  CHECK(typo.result.exit_code != 0);
  CHECK_THAT(typo.result.err,
             Catch::Contains("muster: --muster-policy: unknown key \"tpp\" in \"tpp=2\""));
}

TEST_CASE(
    "the SPANK plugin without an answering musterd: the task runs and says why, or fails "
    "when required",
    "[slurm][spank]") {
  MUSTER_SKIP_WITHOUT_SLURM();
  REQUIRE(fs::exists(kPlugin));
  silent_socket silent;
  muster::test::temp_dir gone("no-musterd");
  const auto missing = (gone / "musterd.sock").string();
  muster::test::slurm_cluster_options options;
  options.plugstack = plugstack("socket=" + missing);
  slurm_cluster cluster(options);

  auto no_socket = srun_env(cluster, {"-N2"}, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  INFO(no_socket.result.out << no_socket.result.err << cluster.log_tail());
  REQUIRE(no_socket.result.exit_code == 0);
  REQUIRE(no_socket.tasks.size() == 2);
  for (const auto& [task, env] : no_socket.tasks) {
    CHECK(value_of(env, "CUDA_DEVICE_MAX_CONNECTIONS") == "1");
    CHECK(value_of(env, "MUSTER_SPANK_POLICY") ==
          "none: musterd did not answer (cannot connect to " + missing +
              ": No such file or directory)");
  }
  CHECK_THAT(no_socket.result.err,
             Catch::Contains("runs without the site's GPU policy: musterd did not answer "
                             "(cannot connect to " +
                             missing + ": No such file or directory)"));
  // how to start it here: systemd's unit where systemd runs, else musterd on that socket
  CHECK_THAT(no_socket.result.err,
             Catch::Contains(std::filesystem::is_directory("/run/systemd/system")
                                 ? std::string("start it (systemctl start musterd)")
                                 : "start it (no systemd runs this node: as root, musterd "
                                   "--socket " +
                                       missing));

  // a daemon that takes the connection and never answers: each task waits timeout_ms, no more
  muster::test::write_file(cluster.plugstack_conf(),
                           plugstack("socket=" + silent.path + " timeout_ms=300"));
  const auto start = std::chrono::steady_clock::now();
  auto hung = srun_env(cluster, {"-N2"});
  const auto took = std::chrono::steady_clock::now() - start;
  INFO(hung.result.out << hung.result.err);
  REQUIRE(hung.result.exit_code == 0);
  CHECK(hung.tasks.size() == 2);
  CHECK_THAT(hung.result.err, Catch::Contains("no answer from " + silent.path + " within 300 ms"));
  CHECK(took < 10s);

  // required=1: the task does not start
  muster::test::write_file(cluster.plugstack_conf(),
                           plugstack("socket=" + missing + " required=1"));
  auto required = srun_env(cluster, {"-N1"});
  CHECK(required.result.exit_code != 0);
  CHECK(required.tasks.empty());
  CHECK_THAT(required.result.err,
             Catch::Contains("plugstack.conf says required=1, so the task does not start"));

  // a typo in plugstack.conf names the argument
  muster::test::write_file(cluster.plugstack_conf(), plugstack("sokcet=" + missing));
  auto typo = srun_env(cluster, {"-N1"});
  CHECK(typo.result.exit_code != 0);
  CHECK_THAT(typo.result.err,
             Catch::Contains("muster: plugstack.conf: unknown argument \"sokcet="));
}
