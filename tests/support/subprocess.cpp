// Real subprocesses for tests: see subprocess.hpp.
#include "tests/support/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace muster::test {
namespace {

std::vector<std::string> child_environment(const env_change& change) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& name : change.unset) env.erase(name);
  for (const auto& [name, value] : change.set) env[name] = value;
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
}

// Spawns argv with the given fds as stdin/stdout/stderr (-1 keeps the parent's).
pid_t spawn_with(const std::vector<std::string>& argv, const env_change& change, int in_fd,
                 int out_fd, int err_fd) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&actions, in_fd, STDIN_FILENO);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(change);
  auto c_args = c_strings(args);
  auto c_env = c_strings(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, c_args[0], &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("spawn " + argv[0] + ": " + strerror(rc));
  return pid;
}

}  // namespace

process_result wait_process(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
  }
  process_result result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

child_process spawn_process(const std::vector<std::string>& argv, const env_change& env) {
  int out[2];
  make_pipe(out);
  child_process child;
  try {
    child.pid = spawn_with(argv, env, -1, out[1], -1);
  } catch (...) {
    close(out[0]);
    close(out[1]);
    throw;
  }
  close(out[1]);
  child.out_fd = out[0];
  return child;
}

process_result run_process(const std::vector<std::string>& argv, const env_change& env,
                           const std::string& input) {
  // A child that exits without reading its stdin must not kill the test with SIGPIPE.
  static const bool sigpipe_ignored = (signal(SIGPIPE, SIG_IGN), true);
  (void)sigpipe_ignored;
  int in[2], out[2], err[2];
  make_pipe(in);
  make_pipe(out);
  make_pipe(err);
  pid_t pid = spawn_with(argv, env, in[0], out[1], err[1]);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // Feed stdin and drain both outputs together so no pipe fills up and blocks the child.
  size_t written = 0;
  int in_fd = in[1];
  if (input.empty()) { close(in_fd); in_fd = -1; }
  std::string out_text, err_text;
  int open_outputs = 2;
  char buf[65536];
  while (open_outputs > 0 || in_fd >= 0) {
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? out_text : err_text).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        (i == 0 ? out[0] : err[0]) = -1;
        --open_outputs;
      }
    }
    if (in_fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EINTR) written = input.size();  // the child closed its stdin
      if (written == input.size()) { close(in_fd); in_fd = -1; }
    }
  }
  process_result result = wait_process(pid);
  result.out = std::move(out_text);
  result.err = std::move(err_text);
  return result;
}

}  // namespace muster::test
