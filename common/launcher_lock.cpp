#include "common/launcher_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace muster::store {

launcher_lock::launcher_lock(const std::filesystem::path& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  // a status asking at this moment holds it exclusively for an instant: try again briefly
  for (int tries = 0; tries < 100; ++tries) {
    if (::flock(fd_, LOCK_SH | LOCK_NB) == 0) return;
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::close(fd_);
  fd_ = -1;
}

launcher_lock::~launcher_lock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<bool> launcher_alive(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
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
