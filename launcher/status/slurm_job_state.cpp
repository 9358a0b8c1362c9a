// What Slurm says of one job: see slurm_job_state.hpp.
#include "launcher/status/slurm_job_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/run_program.hpp"

namespace muster::launcher::status {

namespace {

// squeue's states of a job that will run no more (squeue(1), JOB STATE CODES)
constexpr std::string_view kEnded[] = {"BOOT_FAIL", "CANCELLED", "COMPLETED",     "DEADLINE",
                                       "FAILED",    "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                                       "REVOKED",   "TIMEOUT"};

bool ended_state(std::string_view state) {
  return std::find(std::begin(kEnded), std::end(kEnded), state) != std::end(kEnded);
}

}  // namespace

slurm_job_state parse_job_state(int exit_code, std::string_view output) {
  if (output.find("Invalid job id specified") != std::string_view::npos)
    return {slurm_job_state::kind::ended, "no longer known to Slurm"};
  if (exit_code != 0) return {slurm_job_state::kind::unknown, std::string(output)};
  std::string first;
  bool any = false;
  while (!output.empty()) {
    auto line = output.substr(0, output.find('\n'));
    output.remove_prefix(std::min(output.size(), line.size() + 1));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty() || line.starts_with("CLUSTER: ")) continue;
    if (!ended_state(line)) return {slurm_job_state::kind::alive, std::string(line)};
    if (!any) first = line;
    any = true;
  }
  if (!any) return {slurm_job_state::kind::unknown, "squeue listed nothing"};
  return {slurm_job_state::kind::ended, first};
}

std::string parse_cluster_name(std::string_view config) {
  while (!config.empty()) {
    auto line = config.substr(0, config.find('\n'));
    config.remove_prefix(std::min(config.size(), line.size() + 1));
    if (!line.starts_with("ClusterName ") && !line.starts_with("ClusterName=")) continue;
    line.remove_prefix(line.find('=') + 1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    return std::string(line);
  }
  return "";
}

slurm_job_state ask_job_state(const std::string& id, const std::optional<std::string>& cluster,
                              std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {"squeue", "--jobs=" + id, "--states=all", "--noheader",
                                   "--format=%T"};
  const auto squeue_said = [&](const std::vector<std::string>& args) -> slurm_job_state {
    const auto r = run_program(args, timeout);
    if (!r.started) return {slurm_job_state::kind::unknown, r.why_not};
    if (r.timed_out) return {slurm_job_state::kind::unknown, "squeue did not answer in time"};
    return parse_job_state(r.exit_code, r.output);
  };
  if (cluster) {
    auto on_cluster = argv;
    on_cluster.push_back("--clusters=" + *cluster);
    const auto said = squeue_said(on_cluster);
    if (said.is != slurm_job_state::kind::unknown) return said;
    const auto config = run_program({"scontrol", "show", "config"}, timeout);
    const auto here = config.started && !config.timed_out && config.exit_code == 0
                          ? parse_cluster_name(config.output)
                          : std::string();
    if (here != *cluster)
      return {slurm_job_state::kind::unknown,
              fmt::format("job {} ran on cluster {}, which squeue here cannot ask: {}", id,
                          *cluster, said.state)};
  }
  return squeue_said(argv);
}

void apply_job_state(run_status& s, const slurm_job_state& said) {
  if (said.is != slurm_job_state::kind::ended || !s.run) return;
  // a process of it here says otherwise (squeue of another cluster, a job id used again)
  if (std::any_of(s.ranks.begin(), s.ranks.end(), [](const rank_status& r) {
        return r.rank.state == store::rank_state::running && r.alive_here;
      }))
    return;
  // a run whose end is recorded: ranks its nodes' launchers left "running" (gone with a node)
  // run no more
  if (s.run->state != store::run_state::running) {
    for (auto& r : s.ranks)
      if (r.rank.state == store::rank_state::running) r.gone = true;
    return;
  }
  // ranks that were their own tasks end unrecorded, the run's success too: Slurm says the end
  if (s.one_task_per_rank) {
    s.slurm_ended = said.state;
    return;
  }
  bool running = false;
  for (auto& r : s.ranks)
    if (r.rank.state == store::rank_state::running) r.gone = running = true;
  if (!running) return;
  s.lost = true;
  s.lost_why = fmt::format(
      "Slurm says job {} is {}", s.run->slurm_job_id.value_or("?"),
      said.state == "no longer known to Slurm" ? said.state : "over (" + said.state + ")");
}

bool asks_slurm(const run_status& s) {
  if (s.lost || !s.run || !s.run->slurm_job_id || s.run->slurm_job_id->empty()) return false;
  return s.run->state == store::run_state::running ||
         std::any_of(s.ranks.begin(), s.ranks.end(), [](const rank_status& r) {
           return r.rank.state == store::rank_state::running && !r.gone;
         });
}

void check_with_slurm(run_status& s, std::chrono::milliseconds timeout) {
  if (asks_slurm(s))
    apply_job_state(s, ask_job_state(*s.run->slurm_job_id, s.run->slurm_cluster, timeout));
}

}  // namespace muster::launcher::status
