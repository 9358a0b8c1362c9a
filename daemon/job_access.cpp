// Who may see and change a job's data: see job_access.hpp.
#include "daemon/job_access.hpp"

#include <pwd.h>

#include <fmt/format.h>

#include <cctype>

#include "common/run_program.hpp"

namespace muster::daemon {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "1000 (alice)", or "1000" for a uid without a passwd entry.
std::string describe_uid(uid_t uid) {
  ::passwd entry{};
  ::passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
    return fmt::format("{} ({})", uid, found->pw_name);
  return std::to_string(uid);
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

access_result allow() {
  return {true, "", ""};
}

access_result judge(const std::string& job_id, const job_owner& owner, uid_t uid) {
  if (uid == 0 || uid == owner.uid) return allow();
  return {false, "denied",
          fmt::format("job {} belongs to uid {} ({}); uid {} may not read or change its records",
                      job_id, describe_uid(owner.uid),
                      owner.source == "slurm" ? "as Slurm reports it" : "who first recorded it",
                      describe_uid(uid))};
}

// What Slurm says of the job: its owner, "unknown" (Slurm answered: no such job), or why it
// could not be asked. `absent` is set when no Slurm is installed or configured here.
struct slurm_answer {
  std::optional<uid_t> owner;
  bool absent = false;
  bool unknown_job = false;
  std::string why_not;
};

slurm_answer ask_slurm(const slurm_lookup& lookup, const std::string& job_id) {
  slurm_answer a;
  if (lookup.scontrol.empty()) {
    a.absent = true;
    return a;
  }
  std::vector<std::string> env;
  if (!lookup.conf.empty()) env.push_back("SLURM_CONF=" + lookup.conf);
  const auto run = run_program({lookup.scontrol, "show", "job", "-o", job_id}, lookup.timeout, env);
  if (!run.started) {
    a.absent = true;  // no scontrol: a node without Slurm
    return a;
  }
  if (run.ok()) a.owner = parse_scontrol_owner(run.output);
  if (a.owner) return a;
  if (run.output.find("Invalid job id") != std::string::npos) {
    a.unknown_job = true;
    return a;
  }
  a.why_not = run.timed_out
                  ? fmt::format("scontrol did not answer within {} ms", lookup.timeout.count())
                  : fmt::format("scontrol show job {}: {}", job_id,
                                run.output.empty() ? "failed without a message" : run.output);
  return a;
}

}  // namespace

std::optional<uid_t> parse_scontrol_owner(std::string_view output) {
  const auto at = output.find("UserId=");
  if (at == std::string_view::npos) return std::nullopt;
  const auto open = output.find('(', at);
  const auto close = output.find(')', open == std::string_view::npos ? at : open);
  if (open == std::string_view::npos || close == std::string_view::npos) return std::nullopt;
  const auto digits = output.substr(open + 1, close - open - 1);
  if (!all_digits(digits) || digits.size() > 10) return std::nullopt;
  const auto uid = std::stoull(std::string(digits));
  if (uid > 0xFFFFFFFEull) return std::nullopt;
  return static_cast<uid_t>(uid);
}

bool looks_like_slurm_job(std::string_view job_id) {
  const auto sep = job_id.find_first_of("_+");
  if (sep == std::string_view::npos) return all_digits(job_id);
  return all_digits(job_id.substr(0, sep)) && all_digits(job_id.substr(sep + 1));
}

access_result authorize_job(node_store& store, const slurm_lookup& lookup,
                            const std::string& job_id, uid_t uid, job_use use) {
  if (auto known = store.owner_of(job_id)) return judge(job_id, *known, uid);
  slurm_answer slurm;
  if (looks_like_slurm_job(job_id))
    slurm = ask_slurm(lookup, job_id);
  else
    slurm.absent = true;
  if (slurm.owner) {
    const job_owner owner{*slurm.owner, "slurm"};
    store.set_owner(job_id, owner, now_ms());
    return judge(job_id, owner, uid);
  }
  if (!slurm.why_not.empty()) {
    if (uid == 0) return allow();  // root may act even when Slurm cannot be asked
    return {false, "unavailable",
            fmt::format("cannot tell who owns job {}: {}; try again when slurmctld answers", job_id,
                        slurm.why_not)};
  }
  if (use == job_use::read)
    return {false, "not_found", fmt::format("no job {} was recorded on this node", job_id)};
  if (slurm.unknown_job && uid != 0)
    return {false, "denied",
            fmt::format("Slurm knows no job {}; only root may record a Slurm job id that Slurm "
                        "does not know",
                        job_id)};
  const job_owner owner{uid, "first_record"};
  store.set_owner(job_id, owner, now_ms());
  return allow();
}

}  // namespace muster::daemon
