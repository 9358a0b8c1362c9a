// `muster status --json`: see status_output.hpp. Numbers a rank did not report are null.
#include <cmath>
#include <nlohmann/json.hpp>

#include "launcher/status/status_output.hpp"

namespace muster::launcher::status {
namespace {

using nlohmann::json;

json real(double v) {
  return std::isnan(v) ? json(nullptr) : json(v);
}

template <class T>
json maybe(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json step_json(const store::step_record& s) {
  return {{"rank", s.rank},
          {"step", s.step + 1},
          {"loss", real(s.loss)},
          {"aux_loss", real(s.aux_loss)},
          {"z_loss", real(s.z_loss)},
          {"grad_norm", real(s.grad_norm)},
          {"lr", real(s.lr)},
          {"tokens", s.tokens},
          {"step_time_s", s.step_time_s},
          {"tokens_per_s", real(s.tokens_per_s)},
          {"mfu", real(s.mfu)},
          {"mem_bytes", s.mem_bytes},
          {"peak_mem_bytes", s.peak_mem_bytes},
          {"mem_device", s.mem_device.empty() ? nlohmann::json() : nlohmann::json(s.mem_device)},
          {"comm_wait_s", real(s.comm_wait_s)},
          {"time_ms", s.time_ms}};
}

json run_json(const store::run_record& r) {
  return {{"run_id", r.run_id},
          {"name", r.name},
          {"state", store::to_string(r.state)},
          {"created_ms", r.created_ms},
          {"updated_ms", r.updated_ms},
          {"world_size", r.world_size},
          {"num_nodes", r.num_nodes},
          {"slurm_job_id", maybe(r.slurm_job_id)}};
}

}  // namespace

std::string status_json(const run_status& s, store::epoch_ms now) {
  json out = {
      {"dir", s.dir.string()},
      {"now_ms", now},
      {"run", s.run ? run_json(*s.run) : json(nullptr)},
      {"layout", s.layout},
      {"steps_planned", s.steps_planned},
      {"steps_done", s.steps_done},
      {"first_step", s.first_step},
      {"complete_steps", s.complete_steps},
      {"loss", maybe(s.loss)},
      {"tokens_per_s", s.tokens_per_s},
      {"mfu", maybe(s.mfu)},
      {"restarts", s.restarts},
      {"lost", s.lost},
      {"lost_why", s.lost_why},
      {"one_task_per_rank", s.one_task_per_rank},
      {"slurm_ended", s.slurm_ended.empty() ? json() : json(s.slurm_ended)},
      {"slurm_now", s.slurm_now.empty() ? json() : json(s.slurm_now)},
      {"first_failure", s.first_failure ? json(s.first_failure->message) : json(nullptr)},
      {"requeue_refused", s.requeue_refused ? json(s.requeue_refused->message) : json(nullptr)}};
  json ranks = json::array();
  for (const auto& r : s.ranks)
    ranks.push_back({{"rank", r.rank.rank},
                     {"host", r.rank.host},
                     {"local_rank", r.rank.local_rank},
                     {"pid", maybe(r.rank.pid)},
                     {"state", store::to_string(r.rank.state)},
                     {"exit_code", maybe(r.rank.exit_code)},
                     {"signal", maybe(r.rank.signal)},
                     {"last_step", r.last ? json(step_json(*r.last)) : json(nullptr)},
                     {"heartbeat_age_s", maybe(r.heartbeat_age_s)},
                     {"laggard", r.laggard},
                     {"gone", r.gone}});
  out["ranks"] = ranks;
  json errors = json::array();
  for (const auto& e : s.errors)
    errors.push_back({{"rank", e.rank},
                      {"step", e.step ? json(*e.step + 1) : json(nullptr)},
                      {"phase", e.phase},
                      {"kind", e.kind},
                      {"message", e.message},
                      {"time_ms", e.time_ms}});
  out["errors"] = errors;
  json history = json::array();
  for (const auto& step : s.history) history.push_back(step_json(step));
  out["history"] = history;
  return out.dump(2) + "\n";
}

std::string job_json(const slurm_job& j) {
  return json{{"run", nullptr},
              {"slurm_job",
               {{"id", j.id},
                {"state", j.state},
                {"elapsed", j.elapsed},
                {"nodes", j.nodes},
                {"nodelist_or_reason", j.where},
                {"name", j.name}}}}
             .dump(2) +
         "\n";
}

std::string runs_json(const std::vector<run_entry>& runs, store::epoch_ms now,
                      const std::optional<slurm_job_list>& slurm,
                      const std::vector<std::filesystem::path>& storeless) {
  json out = json::array();
  for (const auto& e : runs) {
    auto r = run_json(e.run);
    r["dir"] = e.dir.string();
    r["steps_done"] = e.steps_done;
    r["lost"] = e.lost;
    r["updated_ms"] = e.updated_ms;  // the steps' too
    out.push_back(r);
  }
  json doc = {{"now_ms", now}, {"runs", out}};
  json without = json::array();
  for (const auto& dir : storeless) without.push_back(dir.filename().string());
  doc["storeless_runs"] = without;
  if (slurm) {
    json jobs = json::array();
    for (const auto& j : slurm->jobs) {
      json run;
      for (const auto& e : runs)
        if (e.run.slurm_job_id == j.id) run = e.run.run_id;
      jobs.push_back({{"id", j.id},
                      {"state", j.state},
                      {"elapsed", j.elapsed},
                      {"nodes", j.nodes},
                      {"nodelist_or_reason", j.where},
                      {"name", j.name},
                      {"run", run}});
    }
    doc["slurm_jobs"] = jobs;
    if (!slurm->error.empty()) doc["slurm_error"] = slurm->error;
  }
  return doc.dump(2) + "\n";
}

}  // namespace muster::launcher::status
