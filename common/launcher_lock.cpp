#include "common/launcher_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace muster::store {

launcher_lock::launcher_lock(const std::filesystem::path& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  // waits, where a status asking holds it exclusively for an instant; a file left unlocked
  // (flock refused) would read as "ended", so it goes
  int rc;
  while ((rc = ::flock(fd_, LOCK_SH)) != 0 && errno == EINTR) {
  }
  if (rc == 0) return;
  ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  std::filesystem::remove(file, ec);
}

launcher_lock::~launcher_lock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<bool> launcher_alive(const std::filesystem::path& file) {
  // read and write where it may (NFSv4 takes flock as a POSIX lock, and its exclusive one needs
  // a file open for writing), else read only (another user's run)
  int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<bool> alive;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    alive = false;  // closing the file below lets it go
  } else if (errno == EWOULDBLOCK) {
    alive = true;
  }
  ::close(fd);
  return alive;
}

}  // namespace muster::store
