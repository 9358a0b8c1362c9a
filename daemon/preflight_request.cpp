// The `preflight` request: see preflight_request.hpp.
#include "daemon/preflight_request.hpp"

#include <fmt/format.h>

#include <chrono>

#include "common/run_store_records.hpp"
#include "daemon/job_request.hpp"
#include "daemon/preflight_probe.hpp"
#include "daemon/request_fields.hpp"

namespace muster::daemon {

using nlohmann::json;

namespace {

json checks_json(const preflight_result& r) {
  json checks = json::array();
  for (const auto& c : r.checks)
    checks.push_back({{"check", c.id}, {"status", c.status}, {"detail", c.detail}});
  return checks;
}

}  // namespace

request_work preflight_work(const json& request, const node_context& node, uid_t uid) {
  only_keys(request, "request", {"version", "request", "job", "gpus", "num_gpus", "run_dir"});
  const json& job = object_field(request, "job", "request");
  only_keys(job, "job", {"id", "step"});
  const auto ref = *read_job_ref(job, true);
  preflight_ask ask;
  ask.job_id = ref.id;
  if (const json* gpus = field(request, "gpus")) {
    if (!gpus->is_array() || gpus->size() > 4096)
      throw bad_request(
          fmt::format("request.gpus: expected an array of GPU indices, got {}", brief(*gpus)));
    for (const auto& g : *gpus) {
      if (!g.is_number_integer() || g.get<long long>() < 0 || g.get<long long>() > 4095)
        throw bad_request(
            fmt::format("request.gpus: {} is not a GPU index from 0 to 4095", brief(g)));
      ask.gpus.push_back(g.get<int>());
    }
  }
  read(request, "num_gpus", "request", ask.num_gpus, 0, 4096);
  read(request, "run_dir", "request", ask.run_dir);
  return [ref, ask, node, uid](node_store& store) mutable {
    work_result out;
    out.access = authorize_job(store, node.slurm, ref.id, uid, job_use::claim);
    if (!out.access.allowed) return out;
    // the run directory is the job's: judged for its owner when root asks (a prolog)
    const auto& owner = out.access.owner;
    ask.uid = uid == 0 && owner ? owner->uid : uid;
    const auto facts = probe_preflight(ask, node.preflight, node.limits, node.slurm);
    const auto result = run_preflight(facts, node.limits);
    const auto checks = checks_json(result);
    const auto time = store::now_ms();
    std::vector<health_entry> observations;
    for (const auto& c : result.checks)
      if (c.status == "fail") observations.push_back({time, c.id, -1, c.detail});
    // the verdict is the prolog's to act on, recorded or not
    write_or_warn(fmt::format("job {}'s preflight", ref.id), [&] {
      store.add_preflight({time, ref.id, ref.step, result.passed, checks.dump()});
      if (!observations.empty()) store.add_health(observations);
    });
    out.fields =
        members_of({{"passed", result.passed}, {"checks", checks}, {"gpus", to_json(facts.gpus)}});
    return out;
  };
}

}  // namespace muster::daemon
