// Reading a log line by line: see log_reader.hpp.
#include "launcher/diagnose/log_reader.hpp"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/diagnose/keyword_scan.hpp"

namespace muster::launcher::diagnose {
namespace {

constexpr std::size_t kBufferBytes = 1 << 20;

// Emits the lines of `region` (whole lines, each ending in '\n') that hold a keyword of
// `scanner` (every line without one), numbering them from `number`; returns the number of the
// region's last line.
std::int64_t emit_region(std::string_view region, std::int64_t number,
                         const keyword_scanner* scanner, std::vector<std::size_t>& starts,
                         const std::function<void(std::int64_t, std::string_view)>& on_line) {
  auto emit = [&](std::string_view line, std::int64_t n) {
    if (line.size() > kMaxLineBytes) line = line.substr(0, kMaxLineBytes);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line(n, line);
  };
  if (!scanner) {
    for (std::size_t start = 0; start < region.size();) {
      const auto nl = region.find('\n', start);
      emit(region.substr(start, nl - start), ++number);
      start = nl + 1;
    }
    return number;
  }
  // the lines that hold a keyword, found in one pass (fast where almost no line matches, as
  // in a long healthy log); the others are only counted
  starts.clear();
  scanner->find_lines(region, starts);
  std::size_t counted = 0;
  for (const auto start : starts) {
    number += std::count(region.data() + counted, region.data() + start, '\n');
    const auto nl = region.find('\n', start);
    emit(region.substr(start, nl - start), number + 1);
    counted = start;
  }
  return number + std::count(region.data() + counted, region.data() + region.size(), '\n');
}

}  // namespace

std::int64_t read_log_lines(const std::filesystem::path& file,
                            const std::function<void(std::int64_t, std::string_view)>& on_line,
                            std::span<const std::string_view> keywords) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  MUSTER_CHECK(fd >= 0, errc::invalid_input, "--log {}: {}; give a readable log file",
               file.string(), std::strerror(errno));
  std::vector<char> buffer(kBufferBytes);
  std::optional<keyword_scanner> scanner;
  if (!keywords.empty()) scanner.emplace(keywords);
  std::vector<std::size_t> starts;
  bool tuned = false;
  std::size_t have = 0;   // bytes in the buffer not yet emitted
  bool skipping = false;  // inside a line longer than the buffer, already emitted
  std::int64_t number = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data() + have, buffer.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      MUSTER_THROW(errc::invalid_input, "--log {}: {}", file.string(), std::strerror(e));
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
    std::string_view data(buffer.data(), have);
    if (skipping) {  // drop the rest of an overlong line
      const auto nl = data.find('\n');
      if (nl == std::string_view::npos) {
        have = 0;
        continue;
      }
      skipping = false;
      data.remove_prefix(nl + 1);
    }
    const auto last = data.rfind('\n');
    if (last == std::string_view::npos) {
      if (data.size() == buffer.size()) {  // one line fills the buffer: take its start
        number = emit_region(std::string(data.substr(0, kMaxLineBytes)) + "\n", number,
                             scanner ? &*scanner : nullptr, starts, on_line);
        skipping = true;
        have = 0;
      } else {
        std::memmove(buffer.data(), data.data(), data.size());
        have = data.size();
      }
      continue;
    }
    if (scanner && !tuned) {  // anchors from the log's own first buffer
      scanner->tune(data.substr(0, last + 1));
      tuned = true;
    }
    number = emit_region(data.substr(0, last + 1), number, scanner ? &*scanner : nullptr, starts,
                         on_line);
    const auto rest = data.substr(last + 1);
    std::memmove(buffer.data(), rest.data(), rest.size());
    have = rest.size();
  }
  ::close(fd);
  if (have > 0 && !skipping)
    number = emit_region(std::string(buffer.data(), have) + "\n", number,
                         scanner ? &*scanner : nullptr, starts, on_line);
  return number;
}

}  // namespace muster::launcher::diagnose
