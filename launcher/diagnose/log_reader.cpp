// Reading a log line by line: see log_reader.hpp.
#include "launcher/diagnose/log_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace muster::launcher::diagnose {

void read_log_lines(const std::filesystem::path& file,
                    const std::function<void(std::int64_t, std::string_view)>& on_line) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  MUSTER_CHECK(fd >= 0, errc::invalid_input, "--log {}: {}; give a readable log file",
               file.string(), std::strerror(errno));
  std::vector<char> buffer(1 << 20);
  std::string carry;      // the start of a line that continues in the next read
  bool skipping = false;  // inside a line already cut at kMaxLineBytes
  std::int64_t number = 0;
  auto emit = [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line(++number, line);
  };
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      MUSTER_THROW(errc::invalid_input, "--log {}: {}", file.string(), std::strerror(e));
    }
    if (n == 0) break;
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      const auto nl = chunk.find('\n');
      const auto piece = chunk.substr(0, nl);
      if (!skipping) {
        if (carry.empty() && nl != std::string_view::npos && piece.size() <= kMaxLineBytes) {
          emit(piece);  // the common case: a whole line inside the buffer
        } else {
          carry.append(piece.substr(0, kMaxLineBytes - std::min(carry.size(), kMaxLineBytes)));
          if (nl != std::string_view::npos) {
            emit(carry);
            carry.clear();
          } else if (carry.size() >= kMaxLineBytes) {
            emit(carry);
            carry.clear();
            skipping = true;
          }
        }
      }
      if (nl == std::string_view::npos) break;
      skipping = false;
      chunk.remove_prefix(nl + 1);
    }
  }
  ::close(fd);
  if (!carry.empty()) emit(carry);
}

}  // namespace muster::launcher::diagnose
