// Running a short-lived helper program: see run_program.hpp.
#include "common/run_program.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

extern char** environ;

namespace muster {
namespace {

// environ with `extra` added, each replacing a variable of its name.
std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    bool replaced = false;
    for (const auto& x : extra) replaced = replaced || name_of(x) == name_of(*e);
    if (!replaced) out.emplace_back(*e);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Reads `fd` until EOF or `deadline`; false when the deadline came first.
bool read_until(int fd, std::chrono::steady_clock::time_point deadline, std::string& out) {
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    ::pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return ready < 0;  // an error ends the read like EOF; 0 is the deadline
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

program_result run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           const std::vector<std::string>& extra_env) {
  program_result result;
  if (argv.empty()) {
    result.why_not = "no program given";
    return result;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.why_not = fmt::format("pipe: {}", std::strerror(errno));
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // a daemon's sockets stay its own
  auto args = argv;
  auto env = environment_with(extra_env);
  auto arg_ptrs = pointers_to(args);
  auto env_ptrs = pointers_to(env);
  pid_t pid = -1;
  const int rc =
      ::posix_spawnp(&pid, args[0].c_str(), &actions, nullptr, arg_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    result.why_not = fmt::format("{}: {}", argv[0], std::strerror(rc));
    result.spawn_errno = rc;
    return result;
  }
  result.started = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const bool finished = read_until(pipe_fds[0], deadline, result.output);
  ::close(pipe_fds[0]);
  int status = 0;
  // a program that closed its output may still run: it gets the rest of the time to exit
  pid_t done = 0;
  while (finished && std::chrono::steady_clock::now() < deadline) {
    done = ::waitpid(pid, &status, WNOHANG);
    if (done != 0 && !(done < 0 && errno == EINTR)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (done <= 0) {
    ::kill(pid, SIGKILL);
    result.timed_out = true;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  while (!result.output.empty() && (result.output.back() == '\n' || result.output.back() == ' '))
    result.output.pop_back();
  return result;
}

}  // namespace muster
