// musterd's router: see router.hpp.
#include "daemon/router.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "daemon/env_request.hpp"
#include "daemon/job_request.hpp"
#include "daemon/json_text.hpp"
#include "daemon/preflight_request.hpp"
#include "daemon/protocol.hpp"
#include "daemon/record_request.hpp"
#include "daemon/request_fields.hpp"
#include "daemon/status_request.hpp"

namespace muster::daemon {
namespace {

using nlohmann::json;

// {"version":1,"ok":true,<fields>}
std::string ok_reply(const std::string& fields) {
  return fmt::format(R"({{"version":{},"ok":true,{}}})", kProtocolVersion, fields);
}

// The error reply for what a handler threw.
std::string reply_to_exception() {
  try {
    throw;
  } catch (const bad_request& e) {
    return error_reply("bad_request", e.what());
  } catch (const error& e) {
    if (e.category() == errc::store) return error_reply("store", e.what());
    return error_reply("internal", e.what());
  } catch (const std::exception& e) {
    return error_reply("internal", e.what());
  } catch (...) {
    return error_reply("internal", "an exception that is not a std::exception");
  }
}

// Store work whose result is a reply's fields (or an access error), wrapped so that nothing
// escapes it.
store_work guarded(request_work work) {
  return [work = std::move(work)](node_store& store) {
    try {
      auto result = work(store);
      if (!result.access.allowed) return error_reply(result.access.code, result.access.message);
      return ok_reply(result.fields);
    } catch (...) {
      return reply_to_exception();
    }
  };
}

routed dispatch(const json& request, const std::string& name, const node_context& c,
                const peer& who) {
  if (name == "status") return {"", guarded(status_work(request, c))};
  if (name == "env") {
    auto job = env_job_of(request);
    auto input = parse_env_request(request, c);
    if (!job) return {ok_reply(env_reply(decide_gpu_policy(input))), {}};
    return {"", guarded(env_work(*job, std::move(input), c.slurm, who.uid))};
  }
  if (name == "record") return {"", guarded(record_work(request, c.slurm, who))};
  if (name == "job") return {"", guarded(job_work(request, c.slurm, who.uid))};
  if (name == "preflight") return {"", guarded(preflight_work(request, c, who.uid))};
  return {
      error_reply("unknown_request",
                  fmt::format("no request {}; musterd answers: env, job, preflight, record, status",
                              brief(json(name)))),
      {}};
}

}  // namespace

std::string error_reply(std::string_view code, std::string_view message) {
  std::string out = fmt::format(R"({{"version":{},"ok":false,"error":{{)", kProtocolVersion);
  append_json_field(out, "code", code);
  out += ',';
  append_json_field(out, "message", message);
  return out + "}}";
}

routed router::route(std::string_view line, const peer& who) const {
  if (line.size() > kMaxRequestBytes)
    return {error_reply("too_large", fmt::format("the request is {} bytes; the limit is {}",
                                                 line.size(), kMaxRequestBytes)),
            {}};
  json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object())
    return {error_reply("bad_json", "a request is one JSON object on one line"), {}};
  const auto version = request.find("version");
  if (version == request.end() || !version->is_number_integer() || *version != kProtocolVersion)
    return {error_reply(
                "unsupported_version",
                fmt::format("\"version\" must be {} (this musterd's protocol); got {}",
                            kProtocolVersion, version == request.end() ? "none" : brief(*version))),
            {}};
  const auto name = request.find("request");
  if (name == request.end() || !name->is_string())
    return {error_reply("bad_request", "\"request\" must name the request, as a string"), {}};
  try {
    return dispatch(request, name->get<std::string>(), context_, who);
  } catch (...) {
    return {reply_to_exception(), {}};
  }
}

}  // namespace muster::daemon
