// musterd_bench: the real musterd (next to this build's muster) on a temporary socket, 32
// clients on their own connections sending 100,000 `env` requests in all, each waiting for its
// reply. Prints throughput, p50/p99/max latency (request sent -> reply read, on the client) and
// the daemon's RSS (now and peak). Targets (issue 6): p99 under 2 ms, RSS under 20 MB.
// A second pass (alone with --recorded 1) names a job step in the requests, so each one also goes
// through the store thread, which checks the job's owner and records the decisions in the node
// store; the targets are the plain pass's.
//   musterd_bench [--clients N] [--requests N] [--musterd PATH] [--recorded 0|1]
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// A realistic request: a TP + EP job with a few features and the variables a user sets.
const std::string kRequest =
    R"({"version": 1, "request": "env", "job": {"tp": 2, "cp": 1, "ep": 8, )"
    R"("sharding": "optim_grads_params", "torch_version": "2.5.1", "dump_dir": "/runs/moe-1", )"
    R"("features": {"nccl_ub": false, "ep_comm_overlap": true}}, "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", )"
    R"("PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "WARN"}})"
    "\n";

int connect_to(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const auto s = path.string();
  std::copy(s.begin(), s.end(), a.sun_path);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads one reply line; false when the connection ends first.
bool read_line(int fd, std::string& pending) {
  while (pending.find('\n') == std::string::npos) {
    char buf[8192];
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending.append(buf, std::size_t(n));
  }
  pending.erase(0, pending.find('\n') + 1);
  return true;
}

// VmRSS and VmHWM of pid, in KiB.
std::pair<long, long> rss_kib(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  long rss = 0, peak = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) rss = std::stol(line.substr(6));
    if (line.starts_with("VmHWM:")) peak = std::stol(line.substr(6));
  }
  return {rss, peak};
}

double percentile(std::vector<double>& sorted, double p) {
  return sorted[std::min(sorted.size() - 1, std::size_t(p * double(sorted.size())))];
}

}  // namespace

// One daemon, one pass of `requests` from `clients`; prints the figures, returns the exit status.
int run_once(const fs::path& musterd, int clients, int requests, bool recorded) {
  const auto dir = fs::temp_directory_path() / fmt::format("musterd-bench-{}", ::getpid());
  fs::create_directories(dir);
  const auto socket = dir / "musterd.sock";
  std::vector<std::string> args = {musterd.string(), "--socket",  socket.string(), "--group", "",
                                   "--state-dir",    dir.string()};
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0) {
    fmt::print(stderr, "musterd_bench: cannot start {}\n", musterd.string());
    return 1;
  }
  for (int tries = 0; tries < 500; ++tries) {  // until it accepts (5 s)
    if (const int fd = connect_to(socket); fd >= 0) {
      ::close(fd);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto [rss_idle, peak_idle] = rss_kib(pid);

  std::string request = kRequest;
  if (recorded)
    request.replace(request.find(R"("job": {)"), 8, R"("job": {"id": "bench-1", "step": "0", )");
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  std::atomic<int> failures{0};
  const auto start = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      const int fd = connect_to(socket);
      if (fd < 0) {
        ++failures;
        return;
      }
      std::string pending;
      const int mine = requests / clients + (c < requests % clients ? 1 : 0);
      auto& out = latencies[std::size_t(c)];
      out.reserve(std::size_t(mine));
      for (int i = 0; i < mine; ++i) {
        const auto sent = clock_type::now();
        if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size()) ||
            !read_line(fd, pending)) {
          ++failures;
          break;
        }
        out.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - sent).count());
      }
      ::close(fd);
    });
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  const auto [rss, peak] = rss_kib(pid);
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  fs::remove_all(dir);

  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  if (all.empty() || failures > 0) {
    fmt::print(stderr, "musterd_bench: {} client(s) failed, {} replies\n", failures.load(),
               all.size());
    return 1;
  }
  std::sort(all.begin(), all.end());
  const double p99 = percentile(all, 0.99);
  const double rss_mib = double(std::max(rss, peak)) / 1024.0;
  fmt::print("musterd: {} {}env requests from {} clients in {:.2f} s: {:.0f} requests/s\n",
             all.size(), recorded ? "recorded " : "", clients, seconds,
             double(all.size()) / seconds);
  const std::string verdict =
      recorded ? "no target: one such request per job step"
               : fmt::format("target p99 < 2 ms: {}", p99 < 2.0 ? "met" : "NOT met");
  fmt::print("latency (client side): p50 {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms ({})\n",
             percentile(all, 0.5), p99, all.back(), verdict);
  fmt::print(
      "musterd RSS: {:.1f} MiB idle, {:.1f} MiB after, peak {:.1f} MiB (target < 20 MB: {})\n",
      double(rss_idle) / 1024.0, double(rss) / 1024.0, double(peak) / 1024.0,
      rss_mib * 1.048576 < 20.0 ? "met" : "NOT met");
  (void)peak_idle;
  return 0;
}

int main(int argc, char** argv) {
  int clients = 32, requests = 100000, recorded = -1;  // -1: both passes, plain first
  fs::path musterd = fs::canonical("/proc/self/exe").parent_path().parent_path() / "bin/musterd";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--clients")
      clients = std::stoi(argv[i + 1]);
    else if (flag == "--requests")
      requests = std::stoi(argv[i + 1]);
    else if (flag == "--musterd")
      musterd = argv[i + 1];
    else if (flag == "--recorded")
      recorded = std::string(argv[i + 1]) == "1";
  }
  int status = 0;
  for (int pass : {0, 1})
    if (recorded < 0 || recorded == pass) status |= run_once(musterd, clients, requests, pass == 1);
  return status;
}
