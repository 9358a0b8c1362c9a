// The user's Slurm jobs: see slurm_jobs.hpp.
#include "launcher/status/slurm_jobs.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "common/run_program.hpp"
#include "launcher/status/run_status.hpp"

namespace muster::launcher::status {

const slurm_job* find_job(const slurm_job_list& list, std::string_view id) {
  if (id.empty()) return nullptr;
  for (const auto& j : list.jobs)
    if (j.id == id) return &j;
  // an array: "4242" any task of it; "4242_3" a task still in the pending "4242_[0-7]"
  const auto base = id.substr(0, id.find('_'));
  const auto prefix = std::string(base) + (base.size() == id.size() ? "_" : "_[");
  for (const auto& j : list.jobs)
    if (j.id.starts_with(prefix)) return &j;
  return nullptr;
}

slurm_job_list parse_squeue(std::string_view output) {
  slurm_job_list out;
  while (!output.empty()) {
    const auto nl = output.find('\n');
    auto line = output.substr(0, nl);
    output = nl == std::string_view::npos ? std::string_view() : output.substr(nl + 1);
    std::vector<std::string> fields;
    for (int i = 0; i < 5; ++i) {
      const auto bar = line.find('|');
      if (bar == std::string_view::npos) break;
      fields.emplace_back(line.substr(0, bar));
      line.remove_prefix(bar + 1);
    }
    if (fields.size() != 5 || fields[0].empty()) continue;
    out.jobs.push_back({fields[0], fields[1], fields[2], fields[3], fields[4], std::string(line)});
  }
  return out;
}

std::optional<slurm_job_list> user_slurm_jobs(std::chrono::milliseconds timeout) {
  // configless Slurm has no slurm.conf here and squeue still works; a host with only the
  // client installed fails, and stays quiet unless it looks like a Slurm host
  const char* conf = std::getenv("SLURM_CONF");
  const char* job = std::getenv("SLURM_JOB_ID");
  std::error_code ec;
  const bool slurm_host =
      (conf && *conf) || (job && *job) || std::filesystem::exists("/etc/slurm/slurm.conf", ec);
  const auto r =
      run_program({"squeue", "--me", "--noheader", "--format=%i|%T|%M|%D|%R|%j"}, timeout);
  if (!r.started && r.spawn_errno == ENOENT) return std::nullopt;
  if (!r.ok()) {
    if (!slurm_host) return std::nullopt;
    slurm_job_list failed;
    failed.error = r.timed_out ? "squeue did not answer in time"
                   : r.started ? r.output.substr(0, r.output.find('\n'))
                               : r.why_not;
    if (failed.error.empty())
      failed.error = "squeue exited with code " + std::to_string(r.exit_code);
    return failed;
  }
  return parse_squeue(r.output);
}

std::optional<slurm_job> job_without_run(const std::string& id,
                                         const std::filesystem::path& runs_dir) {
  const auto slurm = user_slurm_jobs(std::chrono::seconds(10));
  if (!slurm || !slurm->error.empty()) return std::nullopt;
  if (const auto* job = find_job(*slurm, id)) return *job;
  // a run directory of it without a store (its launchers did not meet): find_run's word stands
  if (slurm_job_run(id, runs_dir)) return std::nullopt;
  MUSTER_THROW(errc::invalid_input,
               "{}: no run directory for Slurm job {} in {}, and squeue --me no longer has it: "
               "its launchers never started (a job cancelled while it was pending, or one whose "
               "prolog failed: sinfo -R names the node it drained and the reason), or it ran with "
               "another launch.runs_dir (--runs-dir DIR); sacct -j {} gives the job's state",
               id, id, runs_dir.string(), id);
}

}  // namespace muster::launcher::status
