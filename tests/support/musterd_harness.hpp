// musterd for integration tests: a client on its socket, a stand-in for systemd's notify socket,
// and a daemon started on a temporary socket and store, ready when constructed. Header-only:
// it uses Catch's REQUIRE, so only test files (main thread) include it.
#pragma once

#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace muster::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::string musterd_program() {
  return std::string(MUSTER_BIN_DIR) + "/musterd";
}

inline sockaddr_un address_of(const fs::path& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const auto s = path.string();
  REQUIRE(s.size() < sizeof a.sun_path);
  std::copy(s.begin(), s.end(), a.sun_path);
  return a;
}

// A client of the daemon: one connection, lines out, lines in.
class client {
 public:
  explicit client(const fs::path& socket) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    const auto a = address_of(socket);
    REQUIRE(::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  }
  ~client() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()));
  }
  // The next line, or "" when the daemon closed the connection first (or `wait` passed).
  std::string line(std::chrono::milliseconds wait = 5000ms) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (true) {
      if (auto nl = pending_.find('\n'); nl != std::string::npos) {
        auto l = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return "";
      char buf[4096];
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return "";
      pending_.append(buf, std::size_t(n));
    }
  }
  nlohmann::json ask(const std::string& request) {
    send(request + "\n");
    const auto reply = line();
    INFO(request);
    REQUIRE(!reply.empty());
    return nlohmann::json::parse(reply);
  }
  // Sends what the socket takes now, without waiting.
  void send_some(const std::string& bytes) {
    ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // Whether the daemon closes the connection within `wait`, reading (and dropping) all it sent.
  bool closed_within(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[65536];
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
    return false;
  }
  // Whether the daemon has closed this connection (reads nothing more within `wait`).
  bool closed_by_daemon(std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, int(wait.count())) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) <= 0;  // 0, or ECONNRESET when it left our bytes unread
  }

 private:
  int fd_;
  std::string pending_;
};

// A datagram socket standing in for systemd's NOTIFY_SOCKET.
class notify_socket {
 public:
  explicit notify_socket(const fs::path& path)
      : path_(path), fd_(::socket(AF_UNIX, SOCK_DGRAM, 0)) {
    const auto a = address_of(path);
    REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  }
  ~notify_socket() { ::close(fd_); }
  // Datagrams until one contains `state`; false when none does within `wait`.
  bool wait_for(const std::string& state, std::chrono::milliseconds wait = 10000ms) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[512];
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0 && std::string(buf, std::size_t(n)).find(state) != std::string::npos) return true;
    }
    return false;
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
  int fd_;
};

// musterd on a temporary socket, ready (READY=1 seen) when constructed, stopped at the end.
struct running_daemon {
  muster::test::temp_dir dir{"musterd"};
  fs::path socket = dir / "run/musterd.sock";
  notify_socket notify{dir / "notify"};
  pid_t pid = -1;

  explicit running_daemon(std::vector<std::string> extra = {}, const std::string& config = "",
                          const std::map<std::string, std::string>& more_env = {}) {
    if (!config.empty()) {
      muster::test::write_file(dir / "musterd.toml", config);
      extra.insert(extra.end(), {"--config", (dir / "musterd.toml").string()});
    }
    std::vector<std::string> argv = {musterd_program(), "--socket", socket.string(), "--state-dir",
                                     (dir / "state").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    muster::test::env_change env;
    env.set["NOTIFY_SOCKET"] = notify.path();
    for (const auto& [name, value] : more_env) env.set[name] = value;
    pid = muster::test::spawn_logged(argv, env, dir / "musterd.log");
    REQUIRE(notify.wait_for("READY=1"));
  }
  ~running_daemon() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      muster::test::wait_process(pid);
    }
  }
  std::string log() const { return muster::test::read_file(dir / "musterd.log"); }
};

}  // namespace muster::test
