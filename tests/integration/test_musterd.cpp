// musterd started for real on a temporary socket: readiness through a real sd_notify socket,
// env requests, malformed and oversize lines, slow and vanishing clients, many clients at once,
// a second daemon on the same socket, and a clean stop on SIGTERM.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <atomic>
#include "common/gpu_policy.hpp"
#include "common/sqlite_db.hpp"
#include "daemon/kernel_log.hpp"
#include "daemon/protocol.hpp"

#include "tests/support/launch_output.hpp"
#include "tests/support/musterd_harness.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using muster::test::address_of;
using muster::test::client;
using muster::test::notify_socket;
using muster::test::running_daemon;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kMusterd = muster::test::musterd_program();

}  // namespace

TEST_CASE("musterd tells systemd it is ready, answers env requests, and stops cleanly on SIGTERM",
          "[musterd]") {
  running_daemon d;
  struct stat st {};
  REQUIRE(::stat(d.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  client c(d.socket);
  const auto reply = c.ask(R"({"version": 1, "request": "env", "job": {"tp": 2}})");
  CHECK(reply["ok"] == true);
  REQUIRE(reply["set"].size() >= 1);
  CHECK(reply["set"][0]["variable"] == "CUDA_DEVICE_MAX_CONNECTIONS");
  CHECK(reply["set"][0]["rule"] == "cuda-max-connections-tp-cp");
  // the same connection serves the next request
  CHECK(c.ask(R"({"version": 1, "request": "env"})")["ok"] == true);

  ::kill(d.pid, SIGTERM);
  const auto end = muster::test::wait_process(d.pid);
  d.pid = -1;
  CHECK(end.exit_code == 0);
  CHECK(d.notify.wait_for("STOPPING=1"));
  CHECK_FALSE(fs::exists(d.socket));
  CHECK_THAT(d.log(), Catch::Contains("listening on " + d.socket.string()));
}

TEST_CASE("musterd answers a malformed line with an error and keeps the connection", "[musterd]") {
  running_daemon d;
  client c(d.socket);
  auto reply = c.ask("{this is not json");
  CHECK(reply["ok"] == false);
  CHECK(reply["error"]["code"] == "bad_json");
  reply = c.ask(R"({"version": 7, "request": "env"})");
  CHECK(reply["error"]["code"] == "unsupported_version");
  CHECK(c.ask(R"({"version": 1, "request": "env"})")["ok"] == true);
}

TEST_CASE("musterd refuses an oversize line, says so, and closes that connection only",
          "[musterd]") {
  running_daemon d;
  client big(d.socket);
  big.send(std::string(muster::daemon::kMaxRequestBytes + 100, 'x'));  // no newline needed
  const auto reply = json::parse(big.line());
  CHECK(reply["error"]["code"] == "too_large");
  CHECK(big.closed_by_daemon(2000ms));
  client next(d.socket);
  CHECK(next.ask(R"({"version": 1, "request": "env"})")["ok"] == true);
}

TEST_CASE(
    "musterd closes a client that sends no full line within the deadline, and serves "
    "others meanwhile",
    "[musterd]") {
  running_daemon d({"--request-timeout-ms", "300"});
  client slow(d.socket);
  slow.send(R"({"version": 1, "req)");
  client quick(d.socket);
  CHECK(quick.ask(R"({"version": 1, "request": "env"})")["ok"] == true);
  CHECK(slow.closed_by_daemon(3000ms));
}

TEST_CASE("a client that goes away mid-request does not disturb musterd", "[musterd]") {
  running_daemon d;
  for (int i = 0; i < 20; ++i) {
    client gone(d.socket);
    gone.send(R"({"version": 1, "request": "env", "job": {"tp":)");
    gone.close();
  }
  {
    client asked_and_gone(d.socket);  // sends a whole request and leaves before the reply
    asked_and_gone.send(std::string(R"({"version": 1, "request": "env"})") + "\n");
  }
  client c(d.socket);
  CHECK(c.ask(R"({"version": 1, "request": "env"})")["ok"] == true);
}

TEST_CASE("musterd serves many clients at once", "[musterd]") {
  running_daemon d;
  // plain sockets in the threads: Catch's assertions are for the main thread only
  const auto address = address_of(d.socket);
  const std::string request =
      std::string(R"({"version": 1, "request": "env", "job": {"cp": 2}})") + "\n";
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int t = 0; t < 16; ++t)
    clients.emplace_back([&] {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
        std::string pending;
        for (int i = 0; i < 50; ++i) {
          if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size()))
            break;
          while (pending.find('\n') == std::string::npos) {
            char buf[4096];
            const auto n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            pending.append(buf, std::size_t(n));
          }
          const auto nl = pending.find('\n');
          if (nl == std::string::npos) break;
          const auto reply = json::parse(pending.substr(0, nl), nullptr, false);
          pending.erase(0, nl + 1);
          if (reply.is_object() && reply["ok"] == true) ++answered;
        }
      }
      ::close(fd);
    });
  for (auto& t : clients) t.join();
  CHECK(answered == 16 * 50);
}

TEST_CASE("musterd closes a client that does not read its replies", "[musterd]") {
  running_daemon d({"--request-timeout-ms", "300"});
  client greedy(d.socket);
  std::string burst;
  for (int i = 0; i < 2000; ++i)
    burst += std::string(R"({"version": 1, "request": "env", "job": {"tp": 2}})") + "\n";
  // sent without reading: the daemon's replies fill the socket buffers, then it gives up
  greedy.send_some(burst);
  client other(d.socket);
  CHECK(other.ask(R"({"version": 1, "request": "env"})")["ok"] == true);
  CHECK(greedy.closed_within(5000ms));
}

TEST_CASE("a second musterd on a served socket is refused, naming the path and the fix",
          "[musterd]") {
  running_daemon d;
  const auto second = muster::test::run_process({kMusterd, "--socket", d.socket.string()});
  CHECK(second.exit_code == 2);
  CHECK_THAT(second.err, Catch::Contains("another musterd (pid " + std::to_string(d.pid) +
                                         ") is already serving " + d.socket.string()));
  CHECK_THAT(second.err, Catch::Contains("kill " + std::to_string(d.pid)));
  CHECK(client(d.socket).ask(R"({"version": 1, "request": "env"})")["ok"] == true);
  // on another socket but the same state directory: refused too, and its socket gone
  const auto other_socket = d.dir / "other.sock";
  const auto shared = muster::test::run_process(
      {kMusterd, "--socket", other_socket.string(), "--state-dir", (d.dir / "state").string()});
  CHECK(shared.exit_code == 2);
  CHECK_THAT(shared.err,
             Catch::Contains("another musterd (pid " + std::to_string(d.pid) +
                             ") uses the state directory " + (d.dir / "state").string()));
  CHECK_FALSE(fs::exists(other_socket));
  CHECK(client(d.socket).ask(R"({"version": 1, "request": "env"})")["ok"] == true);
}

TEST_CASE("musterd replaces the stale socket file of a daemon that died", "[musterd]") {
  muster::test::temp_dir dir("musterd");
  const auto socket = dir / "musterd.sock";
  {
    // a socket file nobody listens on, as a killed daemon leaves it
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const auto a = address_of(socket);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    ::close(fd);
  }
  REQUIRE(fs::exists(socket));
  notify_socket notify(dir / "notify");
  muster::test::env_change env;
  env.set["NOTIFY_SOCKET"] = notify.path();
  const pid_t pid = muster::test::spawn_logged(
      {kMusterd, "--socket", socket.string(), "--state-dir", (dir / "state").string()}, env,
      dir / "log");
  REQUIRE(notify.wait_for("READY=1"));
  CHECK(client(socket).ask(R"({"version": 1, "request": "env"})")["ok"] == true);
  ::kill(pid, SIGTERM);
  CHECK(muster::test::wait_process(pid).exit_code == 0);
}

namespace {

// The value musterd sets `variable` to for a plain GPU job, "" when it sets none.
std::string set_value(client& c, const std::string& variable) {
  const auto reply = c.ask(R"({"version": 1, "request": "env"})");
  for (const auto& d : reply["set"])
    if (d["variable"] == variable) return d["value"];
  return "";
}

const char* kGpuNode = R"([node]
gpus = 8
compute_major = 9
interfaces = ["eth0", "ib0"]
ib_hcas = ["mlx5_0"]
)";

}  // namespace

TEST_CASE("musterd takes the node's facts and the site's policy from its configuration",
          "[musterd]") {
  running_daemon d({}, std::string(kGpuNode) + "[policy]\nnvls_off = true\ntrace_buffer = 64\n");
  client c(d.socket);
  CHECK(set_value(c, "NCCL_SOCKET_IFNAME") == "=ib0");
  CHECK(set_value(c, "NCCL_IB_HCA") == "=mlx5_0");
  CHECK(set_value(c, "NCCL_NVLS_ENABLE") == "0");
  CHECK(set_value(c, "TORCH_NCCL_TRACE_BUFFER_SIZE") == "64");
}

TEST_CASE("SIGHUP reloads a good configuration and keeps the running one over a bad file",
          "[musterd]") {
  running_daemon d({}, kGpuNode);
  client c(d.socket);
  REQUIRE(set_value(c, "NCCL_NVLS_ENABLE").empty());
  muster::test::write_file(d.dir / "musterd.toml",
                           std::string(kGpuNode) + "[policy]\nnvls_off = true\n");
  ::kill(d.pid, SIGHUP);
  auto until = std::chrono::steady_clock::now() + 10s;
  while (set_value(c, "NCCL_NVLS_ENABLE") != "0" && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  CHECK(set_value(c, "NCCL_NVLS_ENABLE") == "0");

  muster::test::write_file(d.dir / "musterd.toml", "[policy]\nnvls_off = maybe\n");
  ::kill(d.pid, SIGHUP);
  until = std::chrono::steady_clock::now() + 10s;
  while (d.log().find("not loaded, the running configuration stays") == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  CHECK_THAT(d.log(), Catch::Contains("musterd.toml:2:"));  // the bad line, named
  CHECK(set_value(c, "NCCL_NVLS_ENABLE") == "0");           // still the good configuration
  CHECK(set_value(c, "NCCL_SOCKET_IFNAME") == "=ib0");
}

TEST_CASE(
    "a node store another process keeps locked costs the records, not the answers, and says so "
    "in the node store's own words",
    "[musterd]") {
  running_daemon d({}, kGpuNode);
  client c(d.socket);
  muster::store::sqlite_db lock(d.dir / "state/musterd.db", muster::store::open_mode::read_write);
  lock.exec("BEGIN EXCLUSIVE", "hold the write lock");
  const auto env =
      c.ask(R"({"version": 1, "request": "env", "job": {"id": "local-7", "step": "0", "tp": 2}})");
  INFO(env.dump() << "\n" << d.log());
  CHECK(env["ok"] == true);
  bool one_connection = false;
  for (const auto& decision : env["set"])
    one_connection = one_connection || (decision["variable"] == "CUDA_DEVICE_MAX_CONNECTIONS" &&
                                        decision["value"] == "1");
  CHECK(one_connection);
  const auto preflight =
      c.ask(R"({"version": 1, "request": "preflight", "job": {"id": "local-7"}})");
  CHECK(preflight["ok"] == true);
  CHECK(preflight.contains("passed"));
  const auto log = d.log();
  CHECK_THAT(log, Catch::Contains("not recorded (job local-7 step 0's environment), answered all "
                                  "the same: node store ") &&
                      Catch::Contains("only one musterd may use a state directory") &&
                      Catch::Contains("not recorded (job local-7's preflight)"));
  CHECK_THAT(log, !Catch::Contains("launch.runs_dir"));
  // the lock gone, the next request is recorded
  lock.exec("ROLLBACK", "let go of the write lock");
  CHECK(c.ask(R"({"version": 1, "request": "env", "job": {"id": "local-7", "step": "1"}})")["ok"] ==
        true);
  const auto job = c.ask(R"({"version": 1, "request": "job", "job": {"id": "local-7"}})");
  INFO(job.dump());
  CHECK(job["ok"] == true);
}

TEST_CASE("musterd --check-config prints the configuration, or names the bad line", "[musterd]") {
  muster::test::temp_dir dir("musterd");
  muster::test::write_file(dir / "good.toml", "[policy]\ntrace_buffer = 10\n");
  auto good = muster::test::run_process({kMusterd, "--config", (dir / "good.toml").string(),
                                         "--check-config", "--socket", "/tmp/x.sock"});
  CHECK(good.exit_code == 0);
  CHECK_THAT(good.out, Catch::Contains("trace_buffer = 10\n"));
  CHECK_THAT(good.out, Catch::Contains("socket = \"/tmp/x.sock\""));
  muster::test::write_file(dir / "bad.toml", "[daemon]\nmode = \"rw\"\n");
  auto bad = muster::test::run_process(
      {kMusterd, "--config", (dir / "bad.toml").string(), "--check-config"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("daemon.mode: \"rw\" is not an octal file mode"));
  auto missing = muster::test::run_process(
      {kMusterd, "--config", (dir / "none.toml").string(), "--check-config"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("none.toml"));
  // directories this user could not make or write are said, as the start would find them only
  // after binding the socket
  auto dirs = muster::test::run_process({kMusterd, "--config", (dir / "good.toml").string(),
                                         "--check-config", "--socket", "/proc/muster/m.sock",
                                         "--state-dir", (dir / "state").string()});
  CHECK(dirs.exit_code == 0);
  CHECK_THAT(dirs.err, Catch::Contains("warning: daemon.socket = /proc/muster/m.sock: /proc (where "
                                       "it would be made) is on a file system that stores "
                                       "nothing") &&
                           !Catch::Contains("daemon.state_dir"));
  // a bad option is exit 2 too, as musterd(8) says
  auto option = muster::test::run_process({kMusterd, "--bogus"});
  CHECK(option.exit_code == 2);
  CHECK_THAT(option.err, Catch::Contains("--bogus") && Catch::Contains("musterd --help"));
}

TEST_CASE("etc/musterd.toml holds every key at its default", "[musterd]") {
  const auto example = muster::test::read_file(fs::path(MUSTER_SOURCE_DIR) / "etc/musterd.toml");
  const auto defaults = muster::test::run_process(
      {kMusterd, "--config", std::string(MUSTER_SOURCE_DIR) + "/etc/musterd.toml",
       "--check-config"});
  REQUIRE(defaults.exit_code == 0);
  CHECK_THAT(example, Catch::Contains(defaults.out));
  muster::test::temp_dir dir("musterd");
  muster::test::write_file(dir / "empty.toml", "");
  const auto builtin = muster::test::run_process(
      {kMusterd, "--config", (dir / "empty.toml").string(), "--check-config"});
  CHECK(builtin.out == defaults.out);
}

TEST_CASE("etc/systemd/musterd.service passes systemd-analyze verify", "[musterd]") {
  if (::access("/usr/bin/systemd-analyze", X_OK) != 0) {
    WARN("SKIPPED: systemd-analyze is not installed");
    return;
  }
  // the unit as installed, with ExecStart on this build's musterd (verify checks it exists)
  auto unit = muster::test::read_file(fs::path(MUSTER_SOURCE_DIR) / "etc/systemd/musterd.service");
  const std::string installed = "/usr/bin/musterd";
  REQUIRE(unit.find("ExecStart=" + installed) != std::string::npos);
  unit.replace(unit.find(installed), installed.size(), kMusterd);
  for (const char* key : {"Type=notify", "WatchdogSec=", "RuntimeDirectory=muster",
                          "StateDirectory=muster", "Restart=on-failure", "ExecReload="})
    CHECK_THAT(unit, Catch::Contains(key));
  CHECK_THAT(unit, !Catch::Contains("\nPrivateDevices="));  // it must see /dev/nvidia*
  muster::test::temp_dir dir("musterd");
  muster::test::write_file(dir / "musterd.service", unit);
  // --man=no: the man page is installed by the musterd package (packaging/test-install.sh
  // verifies the installed unit with it)
  const auto verify = muster::test::run_process(
      {"/usr/bin/systemd-analyze", "verify", "--man=no", (dir / "musterd.service").string()});
  INFO(verify.err);
  CHECK(verify.exit_code == 0);
  CHECK(verify.err.find("musterd.service") == std::string::npos);  // no complaint about it
}

TEST_CASE(
    "muster run takes its workers' GPU environment from musterd, and applies the policy "
    "itself with a warning when no daemon answers",
    "[musterd]") {
  const std::string muster = std::string(MUSTER_BIN_DIR) + "/muster";
  running_daemon d({}, kGpuNode);  // the daemon's config describes the node's network
  muster::test::temp_dir runs("musterd-runs");
  muster::test::env_change env;
  env.set["MUSTER_DAEMON_SOCKET"] = d.socket.string();
  auto asked =
      muster::test::run_process({muster, "run", "launch.runs_dir=" + (runs / "asked").string(),
                                 "launch.nproc=1", "parallel.tensor=1", "--", "/usr/bin/env"},
                                env);
  REQUIRE(asked.exit_code == 0);
  CHECK_THAT(asked.err,
             Catch::Contains("the GPU environment from musterd on " + d.socket.string()));
  CHECK_THAT(asked.err, !Catch::Contains("applied in-process"));
  // the node recorded the step, its end and the decisions under the run's id
  const auto run_id = muster::test::only_run_dir(runs / "asked").filename().string();
  client c(d.socket);
  const auto job = c.ask(R"({"version": 1, "request": "job", "job": {"id": ")" + run_id + R"("}})");
  INFO(job.dump());
  REQUIRE(job["steps"].size() == 1);
  CHECK(job["steps"][0]["state"] == "completed");
  CHECK(job["steps"][0]["exit_code"] == 0);
  CHECK(job["steps"][0]["num_ranks"] == 1);
  CHECK(job["steps"][0]["run_dir"] == muster::test::only_run_dir(runs / "asked").string());
  if (fs::exists("/dev/nvidia0")) {
    CHECK(job["decisions"].size() >= 1);  // a CPU step gets no GPU variables  // a GPU step: the
                                          // daemon's node facts reach the workers
    const auto log =
        muster::test::read_file(muster::test::only_run_dir(runs / "asked") / "logs" / "rank-0.log");
    CHECK_THAT(log, Catch::Contains("NCCL_SOCKET_IFNAME==ib0\n"));
  }

  env.set["MUSTER_DAEMON_SOCKET"] = (d.dir / "nobody.sock").string();
  auto alone =
      muster::test::run_process({muster, "run", "launch.runs_dir=" + (runs / "alone").string(),
                                 "launch.nproc=1", "--", "/usr/bin/env"},
                                env);
  REQUIRE(alone.exit_code == 0);
  CHECK_THAT(alone.err, Catch::Contains("no musterd on " + (d.dir / "nobody.sock").string()));
  CHECK_THAT(alone.err, Catch::Contains("the GPU environment policy is applied in-process"));
  // the record the node misses is said once, at the step's start, not again at its end
  const auto said = alone.err.find("the node does not record step ");
  CHECK(said != std::string::npos);
  CHECK(alone.err.find("the node does not record step ", said + 1) == std::string::npos);
  CHECK_THAT(alone.err, Catch::Contains(".0\n"));  // a local run is its job's step 0
  const auto alone_log =
      muster::test::read_file(muster::test::only_run_dir(runs / "alone") / "logs" / "rank-0.log");
  if (!fs::exists("/dev/nvidiactl"))  // on a GPU host the in-process policy sees GPUs too
    CHECK_THAT(alone_log, !Catch::Contains("CUDA_DEVICE_ORDER="));
}

TEST_CASE("muster node status, env and preflight show what musterd says, and say when none answers",
          "[musterd]") {
  const std::string muster = std::string(MUSTER_BIN_DIR) + "/muster";
  running_daemon d({}, std::string(kGpuNode) + "[policy]\nnvls_off = true\n");
  muster::test::env_change env;
  env.set["MUSTER_DAEMON_SOCKET"] = d.socket.string();
  const auto text = muster::test::run_process({muster, "node", "status"}, env);
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("gpus      8 (compute capability 9.x)"));
  CHECK_THAT(text.out, Catch::Contains("network   eth0, ib0"));
  CHECK_THAT(text.out, Catch::Contains("hcas      mlx5_0"));
  CHECK_THAT(text.out, Catch::Contains("policy    NVLS off"));
  const auto as_json = muster::test::run_process({muster, "node", "status", "--json"}, env);
  REQUIRE(as_json.exit_code == 0);
  const auto reply = json::parse(as_json.out);
  CHECK(reply["node"]["gpus"] == 8);
  CHECK(reply["daemon"]["uptime_s"].get<double>() >= 0);

  // muster node env: the environment for the job's workers here, each with its rule
  const auto tp2 = muster::test::run_process(
      {muster, "node", "env", "parallel.tensor=2", "parallel.sequence_parallel=true",
       "parallel.sharding=no_shard", "--gpus", "2"},
      env);
  CHECK(tp2.exit_code == 0);
  CHECK_THAT(tp2.out, Catch::Contains("set      CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                                      "         cuda-max-connections-tp-cp: "));
  CHECK_THAT(tp2.out, Catch::Contains("set      NCCL_NVLS_ENABLE=0"));  // the site's policy
  // a layout over several nodes: this node is one of them
  const auto two_nodes = muster::test::run_process(
      {muster, "node", "env", "parallel.expert=4", "--gpus", "2", "--nodes", "2"}, env);
  INFO(two_nodes.out << two_nodes.err);
  CHECK(two_nodes.exit_code == 0);
  const auto one_node =
      muster::test::run_process({muster, "node", "env", "parallel.expert=4", "--gpus", "2"}, env);
  CHECK(one_node.exit_code == 2);
  CHECK_THAT(one_node.err, Catch::Contains("(2 ranks on this node)"));
  // a step without GPUs gets nothing, and is told so rather than shown an empty page
  const auto cpu = muster::test::run_process({muster, "node", "env", "--gpus", "0"}, env);
  CHECK(cpu.exit_code == 0);
  CHECK(cpu.out ==
        "nothing to set or unset: a step with 0 GPUs here keeps its environment as "
        "it is (give --gpus 8 and a job file to see a GPU step's)\n");
  env.set["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
  const auto refused = muster::test::run_process(
      {muster, "node", "env", "comm.nccl_ub=true", "--gpus", "2", "--json"}, env);
  CHECK(refused.exit_code == 2);
  CHECK(json::parse(refused.out)["errors"][0]["rule"] == "nccl-ub-expandable-segments");
  env.set.erase("PYTORCH_CUDA_ALLOC_CONF");
  // the preview is of muster-train's step, which keeps its FSDP buffers, in a run directory
  // made when it starts
  const auto ub =
      muster::test::run_process({muster, "node", "env", "comm.nccl_ub=true", "--gpus", "2"}, env);
  CHECK(ub.exit_code == 0);
  CHECK_THAT(ub.out, !Catch::Contains("fsdp_double_buffer") &&
                         Catch::Contains("TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<run directory>/"
                                         "nccl_trace_rank_"));
  // muster node preflight: Slurm's job and GPUs by default; a GPU the node lacks fails it
  env.set["SLURM_JOB_ID"] = "4242";
  env.set["SLURM_JOB_GPUS"] = "0,1";
  const auto pass = muster::test::run_process({muster, "node", "preflight"}, env);
  CHECK_THAT(pass.out, Catch::Contains("gpus_visible"));
  env.set["SLURM_JOB_GPUS"] = "0,9";
  const auto fail = muster::test::run_process({muster, "node", "preflight", "--json"}, env);
  CHECK(fail.exit_code == 1);
  CHECK(json::parse(fail.out)["passed"] == false);
  const auto bad = muster::test::run_process({muster, "node", "preflight", "--gpus", "0,x"}, env);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--gpus: \"x\" in \"0,x\" is not a GPU index"));
  // muster node job: what the node recorded of the job, its failed preflight among it
  const auto job = muster::test::run_process({muster, "node", "job", "4242"}, env);
  INFO(job.out << job.err);
  CHECK(job.exit_code == 0);
  CHECK_THAT(job.out, Catch::StartsWith("job       4242: ") &&
                          Catch::Contains(" step -: FAILED\n          fail gpus_visible: GPU 0, 9 "
                                          "of the allocation not visible"));
  CHECK(json::parse(muster::test::run_process({muster, "node", "job", "4242", "--json"}, env)
                        .out)["preflights"]
            .size() == 2);
  const auto unknown = muster::test::run_process({muster, "node", "job", "no-such-job"}, env);
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("no job no-such-job was recorded on this node"));

  env.set["MUSTER_DAEMON_SOCKET"] = (d.dir / "nobody.sock").string();
  // a preflight that could not ask is not a node found unfit
  CHECK(muster::test::run_process({muster, "node", "preflight"}, env).exit_code == 4);
  const auto none = muster::test::run_process({muster, "node", "status"}, env);
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.err, Catch::Contains("no musterd on " + (d.dir / "nobody.sock").string()));
  // systemctl only where systemd runs the host; elsewhere the command that starts it
  if (fs::is_directory("/run/systemd/system"))
    CHECK_THAT(none.err, Catch::Contains("systemctl start musterd"));
  else
    CHECK_THAT(none.err, Catch::Contains("no systemd runs this host: start it, musterd --socket " +
                                         (d.dir / "nobody.sock").string()));
}

TEST_CASE("under a systemd watchdog musterd pings WATCHDOG=1 at half the interval", "[musterd]") {
  running_daemon d({}, "", {{"WATCHDOG_USEC", "1000000"}});  // 1 s: a ping every 0.5 s
  REQUIRE(d.notify.wait_for("WATCHDOG=1", 3000ms));
  const auto first = std::chrono::steady_clock::now();
  REQUIRE(d.notify.wait_for("WATCHDOG=1", 3000ms));
  REQUIRE(d.notify.wait_for("WATCHDOG=1", 3000ms));
  // two more pings: about 1 s at half the interval, 2 s at the whole of it
  CHECK(std::chrono::steady_clock::now() - first < 1700ms);
  running_daemon quiet;  // and without a watchdog, none
  CHECK_FALSE(quiet.notify.wait_for("WATCHDOG=1", 600ms));
}

TEST_CASE(
    "preflight on a described GPU node: passes, then names a leftover process of another job "
    "and a hardware Xid, and is recorded under the job",
    "[musterd]") {
  muster::test::temp_dir files("preflight");
  const auto gpus = files / "gpus.json";
  const auto kmsg = files / "kmsg";
  auto describe = [&](const std::string& processes) {
    std::string devices;
    for (int i = 0; i < 2; ++i)
      devices += fmt::format(
          R"({}{{"index": {}, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:{:02X}:00.0",
              "compute": "9.0", "memory_total_mib": 81559, "memory_free_mib": 80000,
              "ecc_uncorrected": 0, "processes": [{}]}})",
          i ? "," : "", i, 0x18 + i, i == 1 ? processes : "");
    muster::test::write_file(
        gpus, R"({"driver_version": "570.86.15", "cuda_driver_version": 12080, "devices": [)" +
                  devices + "]}");
  };
  describe("");
  muster::test::write_file(kmsg, "");
  running_daemon d({}, fmt::format("[node]\ngpu_description = \"{}\"\n[health]\nkernel_log = "
                                   "\"{}\"\nmin_shm_mib = 1\nmin_disk_free_mib = 1\n"
                                   "[slurm]\nsqueue = \"\"\n",
                                   gpus.string(), kmsg.string()));
  client c(d.socket);
  const std::string ask = R"({"version": 1, "request": "preflight", "job": {"id": "4242", )"
                          R"("step": "0"}, "gpus": [0, 1], "run_dir": ")" +
                          (files / "runs/r1").string() + R"("})";
  auto reply = c.ask(ask);
  INFO(reply.dump());
  REQUIRE(reply["ok"] == true);
  CHECK(reply["passed"] == true);
  CHECK(reply["gpus"]["devices"].size() == 2);

  // a process of job 4100 left on GPU 1, and GPU 1 fell off the bus a second ago
  muster::test::env_change env;
  env.set["SLURM_JOB_ID"] = "4100";
  auto leftover = muster::test::spawn_process({"sleep", "30"}, env);
  describe(fmt::format(R"({{"pid": {}, "used_mib": 30000}})", leftover.pid));
  muster::test::write_file(
      kmsg, fmt::format("3,1,{},-;NVRM: Xid (PCI:0000:19:00): 79, pid=9, GPU has fallen off "
                        "the bus.\n",
                        muster::daemon::boot_clock_us() - 1'000'000));
  reply = c.ask(ask);
  INFO(reply.dump());
  CHECK(reply["passed"] == false);
  std::map<std::string, json> checks;
  for (const auto& check : reply["checks"]) checks[check["check"]] = check;
  CHECK(checks["gpu_leftovers"]["status"] == "fail");
  CHECK_THAT(
      checks["gpu_leftovers"]["detail"].get<std::string>(),
      Catch::Contains(fmt::format("GPU 1: pid {} (of job 4100) holds 30000 MiB", leftover.pid)));
  CHECK(checks["gpu_xid"]["status"] == "fail");
  CHECK(checks["shm_size"]["status"] == "pass");
  CHECK(checks["run_dir_writable"]["status"] == "pass");
  ::kill(leftover.pid, SIGKILL);
  muster::test::wait_process(leftover.pid);
  ::close(leftover.out_fd);

  // both preflights are in the job's record; status shows the GPUs
  const auto job = c.ask(R"({"version": 1, "request": "job", "job": {"id": "4242"}})");
  REQUIRE(job["preflights"].size() == 2);
  CHECK(job["preflights"][0]["passed"] == true);
  CHECK(job["preflights"][1]["passed"] == false);
  CHECK(job["preflights"][1]["checks"].size() == 7);
  const auto status = c.ask(R"({"version": 1, "request": "status"})");
  CHECK(status["node"]["gpus"] == 2);  // node.gpus = -1: counted from the description
  CHECK(status["node"]["compute_major"] == 9);
  CHECK(status["gpus"]["source"] == "description");
  CHECK(status["gpus"]["driver_version"] == "570.86.15");
  CHECK(status["gpus"]["devices"][1]["processes"][0]["used_mib"] == 30000);
}

TEST_CASE("every policy rule reaches a client through the real daemon", "[musterd]") {
  running_daemon d({}, kGpuNode);
  client c(d.socket);
  auto job = [](const std::string& fields, const std::string& env = "") {
    return R"({"version": 1, "request": "env", "job": {)" + fields + R"(}, "env": {)" + env + "}}";
  };
  const std::map<std::string, std::string> requests = {
      {"alloc-conf-mismatch", job("", R"("PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512", )"
                                      R"("PYTORCH_ALLOC_CONF": "expandable_segments:True")")},
      {"alloc-conf-expandable", job(R"("features": {"expandable_segments": true})")},
      {"alloc-conf-both", job("", R"("PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512")")},
      {"nccl-ub-expandable-segments",
       job(R"("torch_version": "2.5.1", "features": {"nccl_ub": true})",
           R"("PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True")")},
      {"nccl-ub-double-buffer",
       job(R"("sharding": "optim_grads_params", "features": {"nccl_ub": true})")},
      {"cuda-max-connections-conflict",
       job(R"("tp": 2, "ep": 4, "sharding": "no_shard", "features": {"ep_comm_overlap": true})")},
      {"cuda-max-connections-tp-cp", job(R"("tp": 2, "sharding": "no_shard")")},
      {"cuda-max-connections-fsdp",
       job(R"("sharding": "optim_grads_params")", R"("CUDA_DEVICE_MAX_CONNECTIONS": "1")")},
      {"cuda-max-connections-ep-overlap", job(R"("ep": 4, "features": {"ep_comm_overlap": true})",
                                              R"("CUDA_DEVICE_MAX_CONNECTIONS": "1")")},
      {"expandable-segments-cuda-graphs",
       job(R"("features": {"expandable_segments": true, "cuda_graphs": true})")},
      {"nccl-flight-recorder", job(R"("dump_dir": "/runs/r1")")},
      {"nccl-socket-ifname", job("")},
      {"nccl-ib-hca", job("")},
      {"nccl-nvls-off", job(R"("memory_tight": true)")},
      {"cuda-device-order", job("")},
  };
  for (const auto& rule : muster::gpu_policy_rules()) {
    INFO(rule);
    const auto it = requests.find(std::string(rule));
    REQUIRE(it != requests.end());  // a new rule needs its request here
    const auto reply = c.ask(it->second);
    INFO(reply.dump());
    REQUIRE(reply["ok"] == true);
    bool found = false;
    for (const char* list : {"set", "unset", "settings", "errors"})
      for (const auto& item : reply[list]) found = found || item["rule"] == rule;
    CHECK(found);
  }
}
