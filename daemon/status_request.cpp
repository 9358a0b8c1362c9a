// The `status` request: see status_request.hpp.
#include "daemon/status_request.hpp"

#include <fmt/format.h>

#include "daemon/gpu_inventory.hpp"
#include "daemon/job_request.hpp"
#include "daemon/json_text.hpp"
#include "daemon/request_fields.hpp"
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

std::string status_fields(const node_context& c) {
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

}  // namespace

request_work status_work(const nlohmann::json& request, const node_context& c) {
  only_keys(request, "request", {"version", "request"});
  return [c](node_store& store) {
    work_result out;
    out.fields = status_fields(c);
    gpu_inventory gpus;
    try {
      gpus = probe_gpus(c.preflight.gpu_description);
    } catch (const std::exception& e) {  // a description file broken since the last load
      gpus.source = "none";
      gpus.why_none = e.what();
    }
    out.fields += R"(,"gpus":)" +
                  to_json(gpus).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto steps = nlohmann::json::array();
    for (const auto& s : store.recent_steps(kStatusSteps)) steps.push_back(step_json(s, false));
    out.fields += R"(,"recent_steps":)" +
                  steps.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return out;
  };
}

}  // namespace muster::daemon
