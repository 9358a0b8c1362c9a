// run_unprivileged: see unprivileged.hpp.
#include "tests/support/unprivileged.hpp"

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <stdexcept>

namespace muster::test {
namespace {

constexpr uid_t kNobody = 65534;
constexpr const char* kCannotDrop = "cannot become nobody";

// Writes all of `text` to `fd`; false when the pipe fails.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The child's whole life: drop root, run f, report through `fd`, _exit. Never returns.
[[noreturn]] void run_child(int fd, const std::function<std::string()>& f) {
  std::string result;
  int code = 0;
  try {
    if (geteuid() == 0 &&
        (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0)) {
      result = kCannotDrop;
      code = 3;
    } else {
      try {
        result = f();
      } catch (const std::exception& e) {
        result = std::string("error: ") + e.what();
      } catch (...) {
        // Not std::exception: most likely a failed Catch2 REQUIRE inside f. Its report stays
        // in the child's unflushed stdout; the caller's check on this string fails instead.
        result = "error: f threw something that is not a std::exception (a failed REQUIRE?)";
      }
    }
  } catch (...) {
    code = 4;  // building the result itself failed (out of memory)
  }
  _exit(write_all(fd, result) ? code : 1);
}

}  // namespace

std::string run_unprivileged(const std::function<std::string()>& f) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("run_unprivileged: pipe failed");
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error("run_unprivileged: fork failed");
  }
  if (pid == 0) {
    close(fds[0]);
    run_child(fds[1], f);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    throw std::runtime_error(std::string("run_unprivileged: ") + kCannotDrop +
                             " (setgroups/setgid/setuid 65534 failed)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("run_unprivileged: the child did not exit cleanly");
  }
  return out;
}

bool reachable_by_nobody(const std::filesystem::path& path) {
  std::string seen = run_unprivileged([&] {
    struct stat st {};
    return std::string(::stat(path.c_str(), &st) == 0 ? "yes" : "no");
  });
  return seen == "yes";
}

}  // namespace muster::test
