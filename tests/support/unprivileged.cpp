// run_unprivileged: see unprivileged.hpp.
#include "tests/support/unprivileged.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

namespace muster::test {

std::string run_unprivileged(const std::function<std::string()>& f) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("run_unprivileged: pipe failed");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("run_unprivileged: fork failed");
  if (pid == 0) {
    close(fds[0]);
    std::string result;
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
      result = "error: cannot become nobody";
    } else {
      try {
        result = f();
      } catch (const std::exception& e) {
        result = std::string("error: ") + e.what();
      }
    }
    ssize_t written = write(fds[1], result.data(), result.size());
    _exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("run_unprivileged: the child did not exit cleanly");
  }
  return out;
}

}  // namespace muster::test
