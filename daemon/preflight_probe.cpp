// Gathering what preflight checks: see preflight_probe.hpp.
#include "daemon/preflight_probe.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace muster::daemon {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "4242" from a cgroup line ".../job_4242/step_0/...", or "".
std::string slurm_job_in_cgroup(const std::string& cgroup) {
  for (auto at = cgroup.find("job_"); at != std::string::npos; at = cgroup.find("job_", at + 1)) {
    auto end = at + 4;
    while (end < cgroup.size() && std::isdigit(static_cast<unsigned char>(cgroup[end]))) ++end;
    if (end > at + 4 && (end == cgroup.size() || cgroup[end] == '/' || cgroup[end] == '\n'))
      return cgroup.substr(at + 4, end - at - 4);
  }
  return "";
}

// The value of NAME in a NUL-separated environment block, or "".
std::string environment_value(const std::string& block, std::string_view name) {
  std::size_t start = 0;
  while (start < block.size()) {
    auto end = block.find('\0', start);
    if (end == std::string::npos) end = block.size();
    const std::string_view entry(block.data() + start, end - start);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
        entry[name.size()] == '=')
      return std::string(entry.substr(name.size() + 1));
    start = end + 1;
  }
  return "";
}

std::vector<gid_t> groups_of(uid_t uid) {
  ::passwd entry{};
  ::passwd* found = nullptr;
  char buffer[4096];
  if (::getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) != 0 || !found) return {};
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    ::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count);
  }
  groups.resize(static_cast<std::size_t>(std::max(count, 0)));
  return groups;
}

// `dir`, or when it does not exist yet, the directory it would be made in.
fs::path existing_ancestor(const std::string& dir) {
  fs::path at = fs::absolute(dir);
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path())
    at = at.parent_path();
  return at;
}

}  // namespace

std::optional<std::string> job_of_process(std::int64_t pid, const std::string& proc) {
  const fs::path dir = fs::path(proc) / std::to_string(pid);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return std::nullopt;
  if (auto job = slurm_job_in_cgroup(read_all(dir / "cgroup")); !job.empty()) return job;
  const auto environment = read_all(dir / "environ");
  if (auto job = environment_value(environment, "SLURM_JOB_ID"); !job.empty()) return job;
  return environment_value(environment, "MUSTER_RUN_ID");
}

std::string write_problem(const std::string& dir, uid_t uid) {
  const fs::path at = existing_ancestor(dir);
  struct ::stat st {};
  if (::stat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fmt::format("{}: {} is not a directory; choose another launch.runs_dir", dir,
                       at.string());
  struct ::statvfs vfs {};
  if (::statvfs(at.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY))
    return fmt::format("{}: {} is on a read-only file system; choose another launch.runs_dir", dir,
                       at.string());
  if (uid == 0) return "";
  mode_t need_write = S_IWOTH, need_search = S_IXOTH;
  if (st.st_uid == uid) {
    need_write = S_IWUSR;
    need_search = S_IXUSR;
  } else {
    const auto groups = groups_of(uid);
    if (std::find(groups.begin(), groups.end(), st.st_gid) != groups.end()) {
      need_write = S_IWGRP;
      need_search = S_IXGRP;
    }
  }
  if ((st.st_mode & need_write) && (st.st_mode & need_search)) return "";
  return fmt::format(
      "{}: uid {} cannot write {} (owner uid {}, group {}, mode {:o}); give the job's user "
      "write access there or choose another launch.runs_dir",
      dir, uid, at.string(), st.st_uid, st.st_gid, st.st_mode & 07777);
}

preflight_facts probe_preflight(const preflight_ask& ask, const preflight_sources& sources,
                                const preflight_thresholds& limits) {
  preflight_facts f;
  f.job_id = ask.job_id;
  f.gpus = probe_gpus(sources.gpu_description);
  f.allocated = ask.gpus;
  f.num_allocated = ask.num_gpus;
  for (const auto& d : f.gpus.devices)
    for (const auto& p : d.processes)
      if (auto job = job_of_process(p.pid)) f.job_of_pid[p.pid] = *job;
  f.kernel_log = recent_xids(sources.kernel_log, std::chrono::seconds(limits.xid_window_s));
  struct ::statvfs shm {};
  if (::statvfs(sources.shm_dir.c_str(), &shm) == 0)
    f.shm_mib = static_cast<std::int64_t>(shm.f_blocks * shm.f_frsize / (1024 * 1024));
  f.run_dir = ask.run_dir;
  if (!f.run_dir.empty()) {
    f.run_dir_problem = write_problem(f.run_dir, ask.uid);
    struct ::statvfs disk {};
    if (::statvfs(existing_ancestor(f.run_dir).c_str(), &disk) == 0)
      f.disk_free_mib = static_cast<std::int64_t>(disk.f_bavail * disk.f_frsize / (1024 * 1024));
  }
  return f;
}

}  // namespace muster::daemon
