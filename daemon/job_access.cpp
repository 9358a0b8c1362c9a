// Who may see and change a job's data: see job_access.hpp.
#include "daemon/job_access.hpp"

#include <pwd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <map>

#include "common/log.hpp"
#include "common/run_program.hpp"
#include "common/run_store_records.hpp"

namespace muster::daemon {
namespace {

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
  return {true, "", "", std::nullopt};
}

access_result judge(const std::string& job_id, const job_owner& owner, uid_t uid) {
  if (uid == 0 || uid == owner.uid) return {true, "", "", owner};
  return {false, "denied",
          fmt::format("job {} belongs to uid {} ({}); uid {} may not read or change its records",
                      job_id, describe_uid(owner.uid),
                      owner.source == "slurm" ? "as Slurm reports it" : "who first recorded it",
                      describe_uid(uid)),
          owner};
}

// What Slurm says of the job: its owner, "unknown" (Slurm answered: no such job), or why it
// could not be asked. `absent` is set when no Slurm is installed or configured here.
struct slurm_answer {
  std::optional<uid_t> owner;
  bool absent = false;
  bool unknown_job = false;
  std::string why_not;
};

// Whether this node has Slurm although its squeue could not be started (a PATH without it).
// A configless node (slurmd --conf-server) keeps its copy under slurmd's spool or /run/slurm.
bool slurm_configured(const slurm_lookup& lookup) {
  std::error_code ec;
  if (!lookup.conf.empty()) return true;
  for (const char* file :
       {"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/run/slurm/conf/slurm.conf",
        "/var/spool/slurmd/conf-cache/slurm.conf", "/usr/sbin/slurmd"})
    if (std::filesystem::exists(file, ec)) return true;
  return false;
}

// squeue's output as one line for a reply and the log: its lines joined with "; ", blank ones
// and trailing blanks dropped.
std::string one_line(std::string_view output) {
  std::string out;
  while (!output.empty()) {
    const auto end = std::min(output.find('\n'), output.size());
    auto line = output.substr(0, end);
    output.remove_prefix(std::min(end + 1, output.size()));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (!line.empty()) out += (out.empty() ? "" : "; ") + std::string(line);
  }
  return out;
}

// Job ids Slurm said it does not know, and until when that answer stands.
std::map<std::string, std::chrono::steady_clock::time_point>& unknown_jobs() {
  static std::map<std::string, std::chrono::steady_clock::time_point> jobs;
  return jobs;
}

// squeue's `format` of `jobs` ("123,124"), every state, with the lookup's SLURM_CONF and
// timeout; started with an argv, never a shell.
program_result squeue(const slurm_lookup& lookup, const std::string& jobs, const char* format) {
  std::vector<std::string> env;
  if (!lookup.conf.empty()) env.push_back("SLURM_CONF=" + lookup.conf);
  return run_program({lookup.squeue, "--noheader", "--states=all", "--jobs=" + jobs,
                      std::string("--format=") + format},
                     lookup.timeout, env);
}

slurm_answer ask_slurm(const slurm_lookup& lookup, const std::string& job_id) {
  slurm_answer a;
  if (lookup.squeue.empty()) {
    a.absent = true;
    return a;
  }
  const auto now = std::chrono::steady_clock::now();
  auto& unknown = unknown_jobs();
  std::erase_if(unknown, [&](const auto& entry) { return entry.second < now; });
  if (unknown.contains(job_id)) {
    a.unknown_job = true;
    return a;
  }
  const auto run = squeue(lookup, job_id, "%U");
  // no squeue on PATH and no Slurm: a node without it. A path named in slurm.squeue that is not
  // there is a mistake, not an absence: then no job is its first recorder's.
  if (!run.started && run.spawn_errno == ENOENT && lookup.squeue.find('/') == std::string::npos &&
      !slurm_configured(lookup)) {
    a.absent = true;
    return a;
  }
  if (run.ok()) a.owner = parse_squeue_owner(run.output);
  if (a.owner) return a;
  if (run.output.find("Invalid job id") != std::string::npos || (run.ok() && run.output.empty())) {
    a.unknown_job = true;
    unknown[job_id] = now + std::chrono::minutes(1);
    return a;
  }
  const auto said = one_line(run.output);
  a.why_not = !run.started    ? fmt::format("cannot run {} (slurm.squeue)", run.why_not)
              : run.timed_out ? fmt::format("squeue did not answer within {} ms (slurm.timeout_ms)",
                                            lookup.timeout.count())
                              : fmt::format("squeue --jobs={}: {}", job_id,
                                            said.empty() ? "failed without a message" : said);
  log::get("daemon")->warn("cannot tell who owns job {}: {}", job_id, a.why_not);
  return a;
}

}  // namespace

std::optional<uid_t> parse_squeue_owner(std::string_view output) {
  auto line = output.substr(0, output.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  if (!all_digits(line) || line.size() > 10) return std::nullopt;
  const auto uid = std::stoull(std::string(line));
  if (uid > 0xFFFFFFFEull) return std::nullopt;
  return static_cast<uid_t>(uid);
}

namespace {

bool allocated_state(std::string_view state) {
  for (const char* allocated : {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED",
                                "RESIZING", "SIGNALING", "STAGE_OUT"})
    if (state.starts_with(allocated)) return true;
  return false;
}

}  // namespace

std::optional<bool> slurm_job_allocated(const slurm_lookup& lookup, const std::string& job_id) {
  const auto answers = slurm_jobs_allocated(lookup, {job_id});
  const auto it = answers.find(job_id);
  return it == answers.end() ? std::nullopt : std::optional<bool>(it->second);
}

std::map<std::string, bool> slurm_jobs_allocated(const slurm_lookup& lookup,
                                                 const std::vector<std::string>& job_ids) {
  std::map<std::string, bool> out;
  std::string list;
  for (const auto& id : job_ids)
    if (looks_like_slurm_job(id)) list += (list.empty() ? "" : ",") + id;
  if (lookup.squeue.empty() || list.empty()) return out;
  // "%i %T": the job (an array task as 123_4) and its state, a line each
  const auto run = squeue(lookup, list, "%i %T");
  const bool invalid = run.started && run.output.find("Invalid job id") != std::string::npos;
  if (!run.ok() && !invalid) return out;  // squeue cannot say
  if (invalid && job_ids.size() > 1) {
    // an id Slurm has purged makes squeue refuse the whole list: each on its own (rare)
    for (const auto& id : job_ids)
      if (const auto one = slurm_job_allocated(lookup, id)) out[id] = *one;
    return out;
  }
  for (const auto& id : job_ids)
    if (looks_like_slurm_job(id)) out[id] = false;  // not listed: ended long ago
  std::string_view text = run.ok() ? std::string_view(run.output) : std::string_view();
  while (!text.empty()) {
    const auto end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string id(line.substr(0, space));
    if (out.contains(id)) out[id] = allocated_state(line.substr(space + 1));
  }
  return out;
}

bool looks_like_slurm_job(std::string_view job_id) {
  const auto sep = job_id.find_first_of("_+");
  if (sep == std::string_view::npos) return all_digits(job_id);
  return all_digits(job_id.substr(0, sep)) && all_digits(job_id.substr(sep + 1));
}

namespace {

// The owner the store remembers, or none; `unreadable` (logged) when the store cannot be read
// (a lock held past the busy timeout, an I/O error): then only Slurm's word or root counts.
std::optional<job_owner> remembered_owner(node_store& store, const std::string& job_id,
                                          std::string& unreadable) {
  try {
    return store.owner_of(job_id);
  } catch (const error& e) {
    if (e.category() != errc::store) throw;
    unreadable = e.what();
    log::get("daemon")->warn("job {}'s owner not read from the node store: {}", job_id, e.what());
    return std::nullopt;
  }
}

// Slurm's owner, kept for the next request: not kept costs a squeue later, nothing else.
void remember_owner(node_store& store, const std::string& job_id, const job_owner& owner) {
  write_or_warn(fmt::format("job {}'s owner", job_id),
                [&] { store.set_owner(job_id, owner, store::now_ms()); });
}

access_result unavailable(const std::string& job_id, const std::string& why) {
  return {false, "unavailable",
          fmt::format("cannot tell who owns job {}: {}; try again (a full disk or a held lock "
                      "at musterd's daemon.state_dir: see its journal)",
                      job_id, why),
          std::nullopt};
}

}  // namespace

access_result authorize_job(node_store& store, const slurm_lookup& lookup,
                            const std::string& job_id, uid_t uid, job_use use) {
  std::string unreadable;
  if (auto known = remembered_owner(store, job_id, unreadable)) {
    auto verdict = judge(job_id, *known, uid);
    if (verdict.allowed || known->source != "slurm") return verdict;
    // Slurm reuses job ids: ask again before refusing the uid Slurm may now name
    const auto again = ask_slurm(lookup, job_id);
    if (!again.owner || *again.owner == known->uid) return verdict;
    const job_owner owner{*again.owner, "slurm"};
    remember_owner(store, job_id, owner);
    return judge(job_id, owner, uid);
  }
  slurm_answer slurm;
  if (looks_like_slurm_job(job_id))
    slurm = ask_slurm(lookup, job_id);
  else
    slurm.absent = true;
  if (slurm.owner) {
    const job_owner owner{*slurm.owner, "slurm"};
    remember_owner(store, job_id, owner);
    return judge(job_id, owner, uid);
  }
  // the store could not say whether someone recorded the job first: no claim on it, but root's
  if (!unreadable.empty())
    return uid == 0 ? allow()
                    : unavailable(job_id, "the node store cannot be read (" + unreadable + ")");
  if (!slurm.why_not.empty()) {
    if (uid == 0) return allow();  // root may act even when Slurm cannot be asked
    return {
        false, "unavailable",
        fmt::format("cannot tell who owns job {}: {}; try again when slurmctld answers (a node "
                    "with no Slurm controller to ask: set slurm.squeue = \"\" in musterd's config, "
                    "/etc/muster/musterd.toml by default; to ask another cluster: slurm.conf)",
                    job_id, slurm.why_not),
        std::nullopt};
  }
  if (use == job_use::read)
    return {false, "not_found", fmt::format("no job {} was recorded on this node", job_id),
            std::nullopt};
  if (slurm.unknown_job && uid != 0)
    return {false, "denied",
            fmt::format("Slurm knows no job {}; only root may record a Slurm job id that Slurm "
                        "does not know",
                        job_id),
            std::nullopt};
  // the first recorder owns it only once that is kept: else the next one would be first too
  const job_owner owner{uid, "first_record"};
  try {
    store.set_owner(job_id, owner, store::now_ms());
  } catch (const error& e) {
    if (e.category() != errc::store) throw;
    log::get("daemon")->warn("job {}'s first recorder not recorded: {}", job_id, e.what());
    if (uid == 0) return allow();
    return unavailable(
        job_id, "the node store cannot record its first recorder (" + std::string(e.what()) + ")");
  }
  return {true, "", "", owner};
}

}  // namespace muster::daemon
