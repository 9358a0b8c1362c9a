#include "common/proc_stat.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace muster {
namespace {

// The boot time from /proc/stat ("btime 1795000000"), epoch seconds; 0 when unreadable.
std::int64_t boot_time_s(const std::string& proc) {
  std::ifstream stat(proc + "/stat");
  for (std::string word; stat >> word;)
    if (word == "btime") {
      std::int64_t s = 0;
      stat >> s;
      return s;
    }
  return 0;
}

constexpr std::int64_t kStartGraceMs = 5000;

}  // namespace

std::optional<proc_stat> read_proc_stat(std::int64_t pid, const std::string& proc) {
  if (pid <= 0) return std::nullopt;
  std::ifstream stat(proc + "/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;  // gone
  // "pid (comm) state ppid ...": starttime is field 22, the 20th after the comm (field 2),
  // whose name may hold spaces and parentheses
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  proc_stat s;
  std::int64_t ppid = 0;
  if (!(fields >> s.state >> ppid >> s.pgrp)) return std::nullopt;
  std::string field;
  for (int i = 0; i < 16 && fields >> field;) ++i;
  std::int64_t ticks = 0;
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (fields >> ticks && hz > 0)
    if (const auto boot = boot_time_s(proc); boot > 0)
      s.started_ms = boot * 1000 + ticks * 1000 / hz;
  return s;
}

std::set<std::int64_t> stopped_groups(const std::vector<std::int64_t>& pids,
                                      const std::string& proc) {
  std::set<std::int64_t> out;
  if (pids.empty()) return out;
  const std::set<std::int64_t> wanted(pids.begin(), pids.end());
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc, ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = std::stoll(name);
    const auto s = read_proc_stat(pid, proc);
    if (!s || !s->stopped()) continue;
    if (wanted.contains(pid)) out.insert(pid);  // itself (a Slurm task need lead no group)
    if (wanted.contains(s->pgrp)) out.insert(s->pgrp);
  }
  return out;
}

bool process_started_by(std::int64_t pid, std::int64_t started_ms, const std::string& proc) {
  const auto s = read_proc_stat(pid, proc);
  if (!s || s->state == 'Z') return false;
  return s->started_ms == 0 || s->started_ms <= started_ms + kStartGraceMs;
}

}  // namespace muster
