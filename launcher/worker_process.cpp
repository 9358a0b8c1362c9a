// Starting a worker process: see worker_process.hpp.
#include "launcher/worker_process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "common/executable_path.hpp"

namespace muster::launcher {
namespace {

// Closes a file descriptor when it goes out of scope.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int owned) : fd(owned) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// The child after fork: only async-signal-safe calls until execve. Reports a failed execve's
// errno on `status_fd` (close-on-exec, so a successful execve closes it unwritten).
[[noreturn]] void become_worker(const char* file, char* const* argv, char* const* envp,
                                const cpu_set_t* cpus, pid_t parent, int out_fd, int null_fd,
                                int status_fd) {
  ::setpgid(0, 0);
  if (cpus) ::sched_setaffinity(0, sizeof(cpu_set_t), cpus);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGCHLD})
    ::signal(sig, SIG_DFL);
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(out_fd, STDERR_FILENO);
  ::execve(file, argv, envp);
  int err = errno;
  (void)!::write(status_fd, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

std::filesystem::path find_executable(const std::string& command, const std::string& path) {
  MUSTER_CHECK(!command.empty(), errc::invalid_input,
               "no command to run; give one after --, e.g. muster run job.toml -- python3 train.py");
  errno = 0;
  if (auto file = executable_path(command, path)) return *file;
  MUSTER_CHECK(command.find('/') == std::string::npos, errc::invalid_input,
               "command '{}': {}; check the path and that it is executable", command,
               std::strerror(errno));
  MUSTER_THROW(errc::invalid_input,
               "command '{}' is not on the workers' PATH ({}); give its path or install it",
               command, path.empty() ? "/usr/local/bin:/usr/bin:/bin" : path);
}

spawned_worker spawn_worker(const worker_spec& spec) {
  MUSTER_CHECK(!spec.argv.empty(), errc::invalid_input, "rank {}: an empty command", spec.rank);
  auto path_it = spec.env.find("PATH");
  const auto file = find_executable(spec.argv[0], path_it == spec.env.end() ? "" : path_it->second);

  std::vector<std::string> env_strings;
  for (const auto& [name, value] : spec.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2];
  int status[2];
  MUSTER_CHECK(::pipe2(out, O_CLOEXEC) == 0, errc::io, "rank {}: pipe: {}", spec.rank,
               std::strerror(errno));
  fd_guard out_read{out[0]}, out_write{out[1]};
  MUSTER_CHECK(::pipe2(status, O_CLOEXEC) == 0, errc::io, "rank {}: pipe: {}", spec.rank,
               std::strerror(errno));
  fd_guard status_read{status[0]}, status_write{status[1]};
  fd_guard null_fd{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  MUSTER_CHECK(null_fd.fd >= 0, errc::io, "cannot open /dev/null: {}", std::strerror(errno));

  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : spec.cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &cpus);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  MUSTER_CHECK(pid >= 0, errc::io, "rank {}: fork: {}; the node may be out of processes or memory",
               spec.rank, std::strerror(errno));
  if (pid == 0)
    become_worker(file.c_str(), argv.data(), envp.data(), spec.cpus.empty() ? nullptr : &cpus,
                  parent, out_write.fd, null_fd.fd, status_write.fd);
  ::setpgid(pid, pid);  // also here, so the group exists before the parent signals it
  ::close(out_write.release());  // the child holds the write end now
  ::close(status_write.release());
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(status_read.fd, &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  if (got == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    MUSTER_THROW(errc::invalid_input, "rank {}: cannot run '{}': {}", spec.rank, file.string(),
                 std::strerror(child_errno));
  }
  return {pid, out_read.release()};
}

}  // namespace muster::launcher
