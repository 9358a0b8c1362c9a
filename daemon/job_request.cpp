// The `job` request: see job_request.hpp.
#include "daemon/job_request.hpp"

#include "daemon/request_fields.hpp"

namespace muster::daemon {

using nlohmann::json;

std::string members_of(const json& object) {
  const auto text = object.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.substr(1, text.size() - 2);
}

json step_json(const step_entry& s, bool full) {
  json out = {{"job", s.job_id},
              {"step", s.step_id},
              {"uid", s.uid},
              {"state", s.state},
              {"started_ms", s.started_ms},
              {"ended_ms", s.ended_ms ? json(*s.ended_ms) : json()},
              {"exit_code", s.exit_code ? json(*s.exit_code) : json()}};
  if (full) {
    out["pid"] = s.pid;
    out["run_dir"] = s.run_dir;
    out["num_ranks"] = s.num_ranks;
    out["message"] = s.message;
  }
  return out;
}

request_work job_work(const json& request, const slurm_lookup& slurm, uid_t uid) {
  only_keys(request, "request", {"version", "request", "job"});
  const json& job = object_field(request, "job", "request");
  only_keys(job, "job", {"id"});
  const auto id = read_job_ref(job, true)->id;
  return [id, slurm, uid](node_store& store) {
    work_result out;
    out.access = authorize_job(store, slurm, id, uid, job_use::read);
    if (!out.access.allowed) return out;
    const auto owner = store.owner_of(id);
    json reply = {{"job",
                   {{"id", id},
                    {"uid", owner ? json(owner->uid) : json()},
                    {"owner_from", owner ? owner->source : "unknown"}}},
                  {"steps", json::array()},
                  {"decisions", json::array()},
                  {"preflights", json::array()}};
    for (const auto& s : store.steps_of(id)) reply["steps"].push_back(step_json(s, true));
    for (const auto& d : store.decisions_of(id))
      reply["decisions"].push_back({{"time_ms", d.time_ms},
                                    {"step", d.step_id},
                                    {"rule", d.rule},
                                    {"action", d.action},
                                    {"name", d.name},
                                    {"value", d.value},
                                    {"reason", d.reason}});
    for (const auto& p : store.preflights_of(id))
      reply["preflights"].push_back({{"time_ms", p.time_ms},
                                     {"step", p.step_id},
                                     {"passed", p.passed},
                                     {"checks", json::parse(p.checks_json, nullptr, false)}});
    out.fields = members_of(reply);
    return out;
  };
}

}  // namespace muster::daemon
