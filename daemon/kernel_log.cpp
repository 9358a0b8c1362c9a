// NVIDIA Xid errors in the kernel log: see kernel_log.hpp.
#include "daemon/kernel_log.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "daemon/gpu_inventory.hpp"

namespace muster::daemon {
namespace {

constexpr std::size_t kMaxLogBytes = 16 * 1024 * 1024;

// The number at the start of `s` (after spaces), or nullopt.
template <class T>
std::optional<T> leading_number(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  T value{};
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  if (r.ec != std::errc() || r.ptr == s.data()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<xid_event> parse_xid_record(std::string_view record) {
  const auto semicolon = record.find(';');
  if (semicolon == std::string_view::npos) return std::nullopt;
  const auto header = record.substr(0, semicolon);
  auto message = record.substr(semicolon + 1);
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r'))
    message.remove_suffix(1);
  const auto nvrm = message.find("NVRM: Xid ");
  if (nvrm == std::string_view::npos) return std::nullopt;
  // header: priority,sequence,microseconds,flags
  const auto first = header.find(',');
  const auto second = first == std::string_view::npos ? first : header.find(',', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  const auto when = leading_number<std::int64_t>(header.substr(second + 1));
  if (!when) return std::nullopt;
  xid_event e;
  e.boot_us = *when;
  e.message = std::string(message.substr(nvrm + 6));
  // "Xid (PCI:0000:3b:00): 79, ..."
  const auto after = message.substr(nvrm + 10);
  const auto colon = after.find("): ");
  if (colon == std::string_view::npos) return std::nullopt;
  const auto xid = leading_number<int>(after.substr(colon + 3));
  if (!xid) return std::nullopt;
  e.xid = *xid;
  if (const auto pci = after.find("PCI:"); pci != std::string_view::npos && pci < colon)
    e.pci = pci_key(after.substr(pci + 4, colon - pci - 4));
  return e;
}

bool xid_is_hardware(int xid) {
  static constexpr std::array kHardware = {48, 61, 62,  63,  64,  74,  79,  92,
                                           94, 95, 110, 119, 120, 136, 140, 143};
  return std::find(kHardware.begin(), kHardware.end(), xid) != kHardware.end();
}

std::int64_t boot_clock_us() {
  ::timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000 + t.tv_nsec / 1000;
}

kernel_log_read recent_xids(const std::filesystem::path& path, std::chrono::seconds window) {
  kernel_log_read out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    out.why_not = fmt::format("cannot read {}: {}", path.string(), std::strerror(errno));
    return out;
  }
  const auto since = boot_clock_us() - std::int64_t{window.count()} * 1'000'000;
  std::string pending;
  std::array<char, 8192> buffer;
  std::size_t total = 0;
  auto take_lines = [&](bool all) {
    std::size_t start = 0;
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
      const std::string_view line(pending.data() + start, nl - start);
      if (!line.empty() && line.front() != ' ')
        if (auto e = parse_xid_record(line); e && e->boot_us >= since) out.xids.push_back(*e);
      start = nl + 1;
    }
    pending.erase(0, start);
    if (all && !pending.empty()) {
      if (auto e = parse_xid_record(pending); e && e->boot_us >= since) out.xids.push_back(*e);
      pending.clear();
    }
  };
  while (total < kMaxLogBytes) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: records overwritten
    if (n <= 0) break;                                          // the end, or EAGAIN (kmsg)
    total += static_cast<std::size_t>(n);
    pending.append(buffer.data(), static_cast<std::size_t>(n));
    take_lines(false);
  }
  take_lines(true);
  ::close(fd);
  return out;
}

}  // namespace muster::daemon
