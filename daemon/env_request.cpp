// The `env` request: see env_request.hpp.
#include "daemon/env_request.hpp"

#include <fmt/format.h>

#include <chrono>

#include "common/run_store_records.hpp"
#include "daemon/json_text.hpp"
#include "daemon/request_fields.hpp"
#include "daemon/router.hpp"

namespace muster::daemon {

using nlohmann::json;

gpu_policy_input parse_env_request(const json& request, const node_context& node) {
  only_keys(request, "request", {"version", "request", "job", "env"});
  gpu_policy_input in;
  const json& job = object_field(request, "job", "request");
  only_keys(job, "job",
            {"id", "step", "tp", "cp", "ep", "gpus", "sharding", "torch_version", "memory_tight",
             "dump_dir", "features"});
  read(job, "tp", "job", in.tp);
  read(job, "cp", "job", in.cp);
  read(job, "ep", "job", in.ep);
  read(job, "sharding", "job", in.sharding);
  if (in.sharding != "no_shard" && in.sharding != "optim" && in.sharding != "optim_grads" &&
      in.sharding != "optim_grads_params")
    throw bad_request(
        fmt::format("job.sharding: \"{}\" is not one of no_shard, optim, "
                    "optim_grads, optim_grads_params",
                    in.sharding));
  read(job, "torch_version", "job", in.torch_version);
  read(job, "memory_tight", "job", in.memory_tight);
  read(job, "dump_dir", "job", in.dump_dir);
  const json& features = object_field(job, "features", "job");
  only_keys(features, "job.features",
            {"nccl_ub", "fsdp_double_buffer", "tp_comm_overlap", "ep_comm_overlap",
             "expandable_segments", "cuda_graphs"});
  read(features, "nccl_ub", "job.features", in.nccl_ub);
  read(features, "fsdp_double_buffer", "job.features", in.fsdp_double_buffer);
  read(features, "tp_comm_overlap", "job.features", in.tp_comm_overlap);
  read(features, "ep_comm_overlap", "job.features", in.ep_comm_overlap);
  read(features, "expandable_segments", "job.features", in.expandable_segments);
  read(features, "cuda_graphs", "job.features", in.cuda_graphs);
  for (const auto& [name, value] : object_field(request, "env", "request").items()) {
    if (!value.is_string())
      throw bad_request(fmt::format("env.{}: expected a string, got {}", name, value.type_name()));
    in.env[name] = value.get<std::string>();
  }
  in.node = node.node;
  in.site = node.site;
  // the GPUs the step sees (its CUDA_VISIBLE_DEVICES), where the client knows them
  read(job, "gpus", "job", in.node.gpus, 0, 4096);
  return in;
}

std::string env_reply(const gpu_policy_result& result) {
  std::string out;
  out.reserve(2048);
  // one list: its items, each an object of the fields `write` appends
  auto list = [&out](std::string_view key, const auto& items, auto write) {
    append_json_string(out, key);
    out += ":[";
    bool first = true;
    for (const auto& item : items) {
      if (!write(item, first)) continue;
      out += '}';
      first = false;
    }
    out += ']';
  };
  auto decisions = [&](bool with_value) {
    return [&out, with_value](const gpu_policy_decision& d, bool first) {
      if (d.value.has_value() != with_value) return false;
      out += first ? "{" : ",{";
      append_json_field(out, "variable", d.variable);
      if (d.value) {
        out += ',';
        append_json_field(out, "value", *d.value);
      }
      out += ',';
      append_json_field(out, "rule", d.rule);
      out += ',';
      append_json_field(out, "reason", d.reason);
      return true;
    };
  };
  list("set", result.env, decisions(true));
  out += ',';
  list("unset", result.env, decisions(false));
  out += ',';
  list("settings", result.settings, [&out](const gpu_policy_setting& s, bool first) {
    out += first ? "{" : ",{";
    append_json_field(out, "setting", s.setting);
    out += ',';
    append_json_field(out, "value", s.value);
    out += ',';
    append_json_field(out, "rule", s.rule);
    out += ',';
    append_json_field(out, "reason", s.reason);
    return true;
  });
  out += ',';
  list("errors", result.errors, [&out](const gpu_policy_error& e, bool first) {
    out += first ? "{" : ",{";
    append_json_field(out, "rule", e.rule);
    out += ',';
    append_json_field(out, "message", e.message);
    return true;
  });
  return out;
}

std::optional<job_ref> env_job_of(const json& request) {
  return read_job_ref(object_field(request, "job", "request"), false);
}

namespace {

std::vector<decision_entry> decisions_of(const job_ref& job, const gpu_policy_result& result) {
  const auto now = store::now_ms();
  std::vector<decision_entry> out;
  for (const auto& d : result.env)
    out.push_back({now, job.id, job.step, d.rule, d.value ? "set" : "unset", d.variable,
                   d.value.value_or(""), d.reason});
  for (const auto& s : result.settings)
    out.push_back({now, job.id, job.step, s.rule, "setting", s.setting, s.value, s.reason});
  for (const auto& e : result.errors)
    out.push_back({now, job.id, job.step, e.rule, "error", "", "", e.message});
  return out;
}

}  // namespace

request_work env_work(const job_ref& job, gpu_policy_input input, const slurm_lookup& slurm,
                      uid_t uid) {
  return [job, input = std::move(input), slurm, uid](node_store& store) {
    work_result out;
    out.access = authorize_job(store, slurm, job.id, uid, job_use::claim);
    if (!out.access.allowed) return out;
    const auto result = decide_gpu_policy(input);
    write_or_warn(fmt::format("job {} step {}'s environment", job.id, job.step),
                  [&] { store.add_decisions(decisions_of(job, result)); });
    out.fields = env_reply(result);
    return out;
  };
}

}  // namespace muster::daemon
