// musterd's router: see router.hpp.
#include "daemon/router.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemon/env_request.hpp"
#include "daemon/json_text.hpp"
#include "daemon/protocol.hpp"
#include "daemon/status_request.hpp"

namespace muster::daemon {
namespace {

using nlohmann::json;

// {"version":1,"ok":true,<fields>}
std::string ok_reply(const std::string& fields) {
  return fmt::format(R"({{"version":{},"ok":true,{}}})", kProtocolVersion, fields);
}

}  // namespace

std::string error_reply(std::string_view code, std::string_view message) {
  std::string out = fmt::format(R"({{"version":{},"ok":false,"error":{{)", kProtocolVersion);
  append_json_field(out, "code", code);
  out += ',';
  append_json_field(out, "message", message);
  return out + "}}";
}

std::string router::handle(std::string_view line) const {
  if (line.size() > kMaxRequestBytes)
    return error_reply("too_large", fmt::format("the request is {} bytes; the limit is {}",
                                                line.size(), kMaxRequestBytes));
  json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object())
    return error_reply("bad_json", "a request is one JSON object on one line");
  const auto version = request.find("version");
  if (version == request.end() || !version->is_number_integer() || *version != kProtocolVersion)
    return error_reply(
        "unsupported_version",
        fmt::format("\"version\" must be {} (this musterd's protocol); got {}", kProtocolVersion,
                    version == request.end()  ? "none"
                    : version->is_primitive() ? version->dump()
                                              : version->type_name()));
  const auto name = request.find("request");
  if (name == request.end() || !name->is_string())
    return error_reply("bad_request", "\"request\" must name the request, as a string");
  try {
    if (*name == "status") return ok_reply(status_reply(request, context_));
    if (*name == "env")
      return ok_reply(env_reply(decide_gpu_policy(parse_env_request(request, context_))));
  } catch (const bad_request& e) {
    return error_reply("bad_request", e.what());
  } catch (const std::exception& e) {
    return error_reply("internal", e.what());
  } catch (...) {
    return error_reply("internal", "an exception that is not a std::exception");
  }
  return error_reply(
      "unknown_request",
      fmt::format("no request {}; musterd answers: env, status",
                  name->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

}  // namespace muster::daemon
