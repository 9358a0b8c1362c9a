// The `env` request: see env_request.hpp.
#include "daemon/env_request.hpp"

#include <fmt/format.h>

#include "daemon/json_text.hpp"
#include "daemon/router.hpp"

namespace muster::daemon {
namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  return v.type_name();
}

// A client's value for a message: scalars as written, arrays and objects by their type (never
// dumped: a deeply nested one would recurse as deep).
std::string brief(const json& v) {
  return v.is_primitive() ? v.dump(-1, ' ', false, json::error_handler_t::replace) : type_name(v);
}

// `object`'s keys must all be in `known`.
void only_keys(const json& object, const char* where,
               std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw bad_request(fmt::format("{}: unknown field \"{}\"", where, key));
}

const json* field(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const json& object_field(const json& object, const char* key, const char* where) {
  static const json empty = json::object();
  const json* v = field(object, key);
  if (!v) return empty;
  if (!v->is_object())
    throw bad_request(fmt::format("{}.{}: expected an object, got {}", where, key, type_name(*v)));
  return *v;
}

void read(const json& object, const char* key, const char* where, int& out) {
  if (const json* v = field(object, key)) {
    if (!v->is_number_integer() || v->get<long long>() < 1 || v->get<long long>() > 1'000'000)
      throw bad_request(
          fmt::format("{}.{}: expected a whole number from 1, got {}", where, key, brief(*v)));
    out = v->get<int>();
  }
}

void read(const json& object, const char* key, const char* where, bool& out) {
  if (const json* v = field(object, key)) {
    if (!v->is_boolean())
      throw bad_request(
          fmt::format("{}.{}: expected true or false, got {}", where, key, brief(*v)));
    out = v->get<bool>();
  }
}

void read(const json& object, const char* key, const char* where, std::string& out) {
  if (const json* v = field(object, key)) {
    if (!v->is_string())
      throw bad_request(fmt::format("{}.{}: expected a string, got {}", where, key, type_name(*v)));
    out = v->get<std::string>();
  }
}

}  // namespace

gpu_policy_input parse_env_request(const json& request, const node_context& node) {
  only_keys(request, "request", {"version", "request", "job", "env"});
  gpu_policy_input in;
  const json& job = object_field(request, "job", "request");
  only_keys(job, "job",
            {"tp", "cp", "ep", "gpus", "sharding", "torch_version", "memory_tight", "dump_dir",
             "features"});
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
      throw bad_request(fmt::format("env.{}: expected a string, got {}", name, type_name(value)));
    in.env[name] = value.get<std::string>();
  }
  in.node = node.node;
  in.site = node.site;
  // the GPUs the step sees (its CUDA_VISIBLE_DEVICES), where the client knows them
  if (const json* gpus = field(job, "gpus")) {
    if (!gpus->is_number_integer() || gpus->get<long long>() < 0 || gpus->get<long long>() > 4096)
      throw bad_request(
          fmt::format("job.gpus: expected a whole number from 0, got {}", brief(*gpus)));
    in.node.gpus = gpus->get<int>();
  }
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

}  // namespace muster::daemon
