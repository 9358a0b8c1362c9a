// The `status` request: see status_request.hpp.
#include "daemon/status_request.hpp"

#include <fmt/format.h>

#include "daemon/env_request.hpp"
#include "daemon/json_text.hpp"
#include "daemon/router.hpp"
#include "muster/version.hpp"

namespace muster::daemon {
namespace {

void append_list(std::string& out, std::string_view key, const std::vector<std::string>& items) {
  append_json_string(out, key);
  out += ":[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, items[i]);
  }
  out += ']';
}

}  // namespace

std::string status_reply(const nlohmann::json& request, const node_context& c) {
  for (const auto& [key, value] : request.items())
    if (key != "version" && key != "request")
      throw bad_request(fmt::format("request: unknown field \"{}\"", key));
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c.started).count();
  std::string out = R"("daemon":{)";
  append_json_field(out, "version", kVersion);
  out += ',';
  append_json_field(out, "git", kGitCommit);
  out += fmt::format(R"(,"uptime_s":{:.1f}}},"node":{{"gpus":{},"compute_major":{},)", uptime,
                     c.node.gpus, c.node.compute_major);
  append_list(out, "interfaces", c.node.interfaces);
  out += ',';
  append_list(out, "ib_hcas", c.node.ib_hcas);
  out += fmt::format(R"(}},"policy":{{"nvls_off":{},"trace_buffer":{}}})", c.site.nvls_off,
                     c.site.trace_buffer);
  return out;
}

}  // namespace muster::daemon
