// Gathering what preflight checks: see preflight_probe.hpp.
#include "daemon/preflight_probe.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
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

// `dir` and every directory above it, deepest first.
std::vector<std::string> path_and_parents(const std::string& dir) {
  std::vector<std::string> out;
  for (fs::path at = fs::absolute(dir).lexically_normal();; at = at.parent_path()) {
    auto text = at.string();
    if (text.size() > 1 && text.back() == '/') text.pop_back();
    out.push_back(text);
    if (!at.has_parent_path() || at == at.parent_path()) break;
  }
  return out;
}

// What the checker saw: the deepest path it could see (index into path_and_parents, -1 none),
// whether that is a directory, the errno of access(W_OK|X_OK) there, its free MiB, and whether
// its file system stores nothing (proc, sysfs: no blocks, where nothing can be made).
struct seen {
  int index = -1;
  int is_dir = 0;
  int write_errno = 0;
  std::int64_t free_mib = -1;
  int no_storage = 0;
};

seen look(const std::vector<std::string>& paths) {
  seen out;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    struct ::stat st {};
    if (::stat(paths[i].c_str(), &st) != 0) continue;
    out.index = static_cast<int>(i);
    out.is_dir = S_ISDIR(st.st_mode) ? 1 : 0;
    out.write_errno = ::access(paths[i].c_str(), W_OK | X_OK) == 0 ? 0 : errno;
    struct ::statvfs vfs {};
    if (::statvfs(paths[i].c_str(), &vfs) == 0) {
      out.free_mib = static_cast<std::int64_t>(vfs.f_bavail * vfs.f_frsize / (1024 * 1024));
      out.no_storage = vfs.f_blocks == 0 ? 1 : 0;
    }
    break;
  }
  return out;
}

// look() as `uid` with its groups, in a child: root's view of paths the user cannot see must
// not leak into the reply, and root may not be root on the file system (NFS root_squash).
// Only system calls run between fork and _exit.
std::optional<seen> look_as(const std::vector<std::string>& paths, uid_t uid) {
  ::passwd entry{};
  ::passwd* found = nullptr;
  char buffer[4096];
  if (::getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) != 0 || !found) return std::nullopt;
  int count = 256;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) < 0) return std::nullopt;
  const gid_t gid = found->pw_gid;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgroups(static_cast<std::size_t>(count), groups.data()) != 0 || ::setgid(gid) != 0 ||
        ::setuid(uid) != 0)
      ::_exit(2);
    const seen s = look(paths);
    ::_exit(::write(fds[1], &s, sizeof s) == static_cast<ssize_t>(sizeof s) ? 0 : 3);
  }
  ::close(fds[1]);
  seen s;
  ssize_t n = -1;
  do n = ::read(fds[0], &s, sizeof s);
  while (n < 0 && errno == EINTR);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof s) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::nullopt;
  return s;
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

run_dir_check check_run_dir(const std::string& dir, uid_t uid) {
  const auto paths = path_and_parents(dir);
  const auto s = uid == 0 ? std::optional<seen>(look(paths)) : look_as(paths, uid);
  run_dir_check out;
  if (!s) {
    out.problem = fmt::format("{}: cannot check it as uid {} (no such user here?)", dir, uid);
    return out;
  }
  if (s->free_mib >= 0) out.free_mib = s->free_mib;
  if (s->index < 0) {
    out.problem = fmt::format("{}: uid {} can see no directory on its path", dir, uid);
    return out;
  }
  const auto& at = paths[static_cast<std::size_t>(s->index)];
  if (s->index > 0) out.made_under = at;
  if (s->index > 0 && s->no_storage)
    out.problem = fmt::format(
        "{} does not exist, and cannot be made in {}: a file system that stores nothing (such as "
        "/proc or /sys); choose another launch.runs_dir",
        dir, at);
  else if (!s->is_dir)
    out.problem = fmt::format("{}: {} is not a directory; choose another launch.runs_dir", dir, at);
  else if (s->write_errno != 0)
    out.problem = fmt::format(
        "{}: uid {} cannot write {}: {}; give the job's user write access there or choose "
        "another launch.runs_dir",
        dir, uid, at, std::strerror(s->write_errno));
  return out;
}

preflight_facts probe_preflight(const preflight_ask& ask, const preflight_sources& sources,
                                const preflight_thresholds& limits, const slurm_lookup& slurm) {
  preflight_facts f;
  f.job_id = ask.job_id;
  try {
    f.gpus = probe_gpus(sources.gpu_description);
  } catch (const error& e) {  // a description file broken since the start: a verdict on it
    f.gpus.source = "none";
    f.gpus.why_none = e.what();
  }
  f.allocated = ask.gpus;
  f.num_allocated = ask.num_gpus;
  for (const auto& d : f.gpus.devices)
    for (const auto& p : d.processes)
      if (auto job = job_of_process(p.pid)) f.job_of_pid[p.pid] = *job;
  if (ask.gpus.empty() && ask.num_gpus < 0) {  // no GPUs named: whose jobs still run here
    std::vector<std::string> others;
    for (const auto& [pid, job] : f.job_of_pid)
      if (!job.empty() && job != ask.job_id &&
          std::find(others.begin(), others.end(), job) == others.end())
        others.push_back(job);
    if (!others.empty()) f.job_allocated = slurm_jobs_allocated(slurm, others);  // one squeue
  }
  f.kernel_log = recent_xids(sources.kernel_log, std::chrono::seconds(limits.xid_window_s));
  f.shm_dir = sources.shm_dir;
  struct ::statvfs shm {};
  if (::statvfs(sources.shm_dir.c_str(), &shm) == 0)
    f.shm_mib = static_cast<std::int64_t>(shm.f_blocks * shm.f_frsize / (1024 * 1024));
  f.run_dir = ask.run_dir;
  if (!f.run_dir.empty()) {
    const auto check = check_run_dir(f.run_dir, ask.uid);
    f.run_dir_problem = check.problem;
    f.run_dir_made_under = check.made_under;
    f.disk_free_mib = check.free_mib;
  }
  return f;
}

}  // namespace muster::daemon
