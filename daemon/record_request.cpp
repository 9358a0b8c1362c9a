// The `record` request: see record_request.hpp.
#include "daemon/record_request.hpp"

#include <fmt/format.h>

#include <chrono>

#include "common/run_store_records.hpp"
#include "daemon/request_fields.hpp"

namespace muster::daemon {

using nlohmann::json;

namespace {

request_work job_end_work(const json& request, const slurm_lookup& slurm, const peer& who) {
  only_keys(request, "request", {"version", "request", "event", "job"});
  const json& job = object_field(request, "job", "request");
  only_keys(job, "job", {"id"});
  const auto ref = *read_job_ref(job, true);
  return [ref, slurm, uid = who.uid](node_store& store) {
    work_result out;
    out.access = authorize_job(store, slurm, ref.id, uid, job_use::read);
    if (!out.access.allowed) return out;
    const int closed = store.job_ended(
        ref.id, store::now_ms(),
        fmt::format("job {} ended on this node before the step recorded its end (its launcher "
                    "was killed, or the step was not a muster launch)",
                    ref.id));
    out.fields = fmt::format(R"("recorded":"job_end","closed":{})", closed);
    return out;
  };
}

}  // namespace

request_work record_work(const json& request, const slurm_lookup& slurm, const peer& who) {
  const auto event = required_string(request, "event", "request");
  if (event == "job_end") return job_end_work(request, slurm, who);
  step_entry step;
  const json& job = object_field(request, "job", "request");
  only_keys(job, "job", {"id", "step"});
  const auto ref = *read_job_ref(job, true);
  step.job_id = ref.id;
  step.step_id = ref.step;
  step.uid = who.uid;
  step.pid = who.pid;
  if (event == "start") {
    only_keys(request, "request", {"version", "request", "event", "job", "run_dir", "num_ranks"});
    read(request, "run_dir", "request", step.run_dir);
    read(request, "num_ranks", "request", step.num_ranks, 0, 1'000'000);
    step.started_ms = store::now_ms();
  } else if (event == "end") {
    only_keys(request, "request",
              {"version", "request", "event", "job", "state", "exit_code", "message"});
    step.state = required_string(request, "state", "request");
    if (step.state != "completed" && step.state != "failed" && step.state != "cancelled")
      throw bad_request(fmt::format(
          "request.state: \"{}\" is not one of completed, failed, cancelled", step.state));
    std::int64_t exit_code = -1;
    read(request, "exit_code", "request", exit_code, -1, 255);
    if (field(request, "exit_code")) step.exit_code = exit_code;
    read(request, "message", "request", step.message);
    if (step.message.size() > 4096) step.message.resize(4096);
    step.ended_ms = store::now_ms();
  } else {
    throw bad_request(fmt::format("request.event: \"{}\" is not start, end or job_end", event));
  }
  return [step, event, slurm](node_store& store) {
    work_result out;
    const auto use = event == "start" ? job_use::claim : job_use::read;
    out.access = authorize_job(store, slurm, step.job_id, step.uid, use);
    if (!out.access.allowed) return out;
    if (event == "start") {
      store.step_started(step);
    } else if (!store.step_ended(step)) {
      out.access = {false, "not_found",
                    fmt::format("job {} step \"{}\" never started on this node; record its "
                                "start first",
                                step.job_id, step.step_id),
                    std::nullopt};
      return out;
    }
    out.fields = fmt::format(R"("recorded":"{}")", event);
    return out;
  };
}

}  // namespace muster::daemon
