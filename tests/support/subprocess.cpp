// Real subprocesses for tests: see subprocess.hpp.
#include "tests/support/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

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

// A file descriptor closed when it goes out of scope (or on reset).
class unique_fd {
 public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

struct pipe_fds {
  unique_fd read_end, write_end;
};

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pipe_fds make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

// Spawns argv with the given fds as stdin/stdout/stderr (-1 keeps the parent's).
pid_t spawn_with(const std::vector<std::string>& argv, const env_change& change, int in_fd,
                 int out_fd, int err_fd) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The test process ignores SIGPIPE (see run_process); children get the default back, as
  // they would from a shell.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&actions, in_fd, STDIN_FILENO);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(change);
  auto c_args = c_strings(args);
  auto c_env = c_strings(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, c_args[0], &actions, &attr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("spawn " + argv[0] + ": " + strerror(rc));
  return pid;
}

// posix_spawn returns once the child has begun its exec, a moment before the kernel sets up the
// new program's environment block: until then /proc/<pid>/environ reads empty. Tests that look
// at a child's environment from outside (as musterd's preflight does) wait for it here.
void wait_for_environment(pid_t pid) {
  const std::string file = "/proc/" + std::to_string(pid) + "/environ";
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(file, std::ios::binary);
    if (!in || in.peek() != std::ifstream::traits_type::eof()) return;  // gone, or set up
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
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
  pipe_fds out = make_pipe();
  child_process child;
  child.pid = spawn_with(argv, env, -1, out.write_end.get(), -1);
  child.out_fd = out.read_end.release();
  wait_for_environment(child.pid);
  return child;
}

namespace {

// argv[0] as execve needs it: itself when it names a path, else its first match on PATH.
std::string program_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  throw std::runtime_error("spawn " + name + ": not found on PATH");
}

}  // namespace

// fork + execve rather than posix_spawn, for PR_SET_PDEATHSIG: a test process that dies without
// running its destructors (an ASan abort, a crash, ctest's timeout) takes its daemons with it
// (SIGKILL from the kernel), where they used to outlive it: a loopback slurmctld, slurmd and
// munged per test, holding their ports. Between fork and exec only async-signal-safe calls.
pid_t spawn_logged(const std::vector<std::string>& argv, const env_change& env,
                   const std::filesystem::path& log) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  unique_fd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  unique_fd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (null_in.get() < 0 || out.get() < 0)
    throw std::runtime_error("spawn " + argv.at(0) + ": cannot open " + log.string() + ": " +
                             strerror(errno));
  const std::string path = program_path(argv[0]);
  std::vector<std::string> args = argv;
  std::vector<std::string> environment = child_environment(env);
  auto c_args = c_strings(args);
  auto c_env = c_strings(environment);
  pipe_fds exec_error = make_pipe();  // CLOEXEC: closes unread when the exec succeeds
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("spawn " + argv[0] + ": fork: " + strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, nullptr);  // the test process ignores it (see run_process)
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const auto fail = [&] {
      const int error = errno;
      (void)!write(exec_error.write_end.get(), &error, sizeof error);
      _exit(127);
    };
    // dup2 onto itself keeps FD_CLOEXEC (an fd opened where the test had closed its stdio)
    const auto onto = [&](int fd, int target) {
      if (fd == target ? fcntl(fd, F_SETFD, 0) < 0 : dup2(fd, target) < 0) fail();
    };
    onto(null_in.get(), STDIN_FILENO);
    onto(out.get(), STDOUT_FILENO);
    onto(out.get(), STDERR_FILENO);
    execve(path.c_str(), c_args.data(), c_env.data());
    fail();
  }
  exec_error.write_end.reset();
  int error = 0;
  ssize_t got;
  while ((got = read(exec_error.read_end.get(), &error, sizeof error)) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof error)) {
    wait_process(pid);
    throw std::runtime_error("spawn " + argv[0] + ": " + strerror(error));
  }
  return pid;
}

std::optional<process_result> try_wait_process(pid_t pid) {
  int status = 0;
  pid_t done;
  while ((done = waitpid(pid, &status, WNOHANG)) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + strerror(errno));
  }
  if (done == 0) return std::nullopt;
  process_result result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

namespace {

// Runs argv with `out` (a pipe, or a terminal's two ends) as its stdout: see run_process.
process_result run_collecting(const std::vector<std::string>& argv, const env_change& env,
                              const std::string& input, pipe_fds out) {
  // A child that exits without reading its stdin must not kill the test with SIGPIPE.
  static const bool sigpipe_ignored = (signal(SIGPIPE, SIG_IGN), true);
  (void)sigpipe_ignored;
  pipe_fds in = make_pipe(), err = make_pipe();
  pid_t pid = spawn_with(argv, env, in.read_end.get(), out.write_end.get(), err.write_end.get());
  in.read_end.reset();
  out.write_end.reset();
  err.write_end.reset();
  if (input.empty()) in.write_end.reset();
  // Feed stdin and drain both outputs together so no pipe fills up and blocks the child.
  unique_fd* outputs[2] = {&out.read_end, &err.read_end};
  std::string texts[2];
  size_t written = 0;
  char buf[65536];
  while (out.read_end.get() >= 0 || err.read_end.get() >= 0 || in.write_end.get() >= 0) {
    pollfd fds[3] = {{out.read_end.get(), POLLIN, 0},
                     {err.read_end.get(), POLLIN, 0},
                     {in.write_end.get(), POLLOUT, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0)
        texts[i].append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        outputs[i]->reset();  // a terminal says EIO at the end
    }
    if (fds[2].fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = write(fds[2].fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EINTR) written = input.size();  // the child closed its stdin
      if (written == input.size()) in.write_end.reset();
    }
  }
  process_result result = wait_process(pid);
  result.out = std::move(texts[0]);
  result.err = std::move(texts[1]);
  return result;
}

}  // namespace

process_result run_process(const std::vector<std::string>& argv, const env_change& env,
                           const std::string& input) {
  return run_collecting(argv, env, input, make_pipe());
}

process_result run_in_terminal(const std::vector<std::string>& argv, const env_change& env) {
  int controller = -1, terminal = -1;
  if (openpty(&controller, &terminal, nullptr, nullptr, nullptr) != 0)
    throw std::runtime_error(std::string("openpty: ") + strerror(errno));
  ::fcntl(controller, F_SETFD, FD_CLOEXEC);
  ::fcntl(terminal, F_SETFD, FD_CLOEXEC);
  termios raw{};
  if (tcgetattr(terminal, &raw) == 0) {
    raw.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // "\n" stays "\n", not "\r\n"
    tcsetattr(terminal, TCSANOW, &raw);
  }
  return run_collecting(argv, env, {}, {unique_fd(controller), unique_fd(terminal)});
}

stopped_child::stopped_child() : pid_(::fork()) {
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid_ == 0) {
    ::pause();
    ::_exit(0);
  }
  ::kill(pid_, SIGSTOP);
  int status = 0;
  ::waitpid(pid_, &status, WUNTRACED);  // stopped once this returns
}

stopped_child::~stopped_child() {
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

}  // namespace muster::test
