// `muster node status [--json]`: what this node's musterd reports (its `status` request):
// the daemon's version and uptime, the node's GPUs, interfaces and HCAs, the site's policy.
// Exit 1 when no daemon answers, naming the socket and why.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "launcher/cli/verbs.hpp"
#include "launcher/daemon_client.hpp"

namespace muster::cli {
namespace {

using nlohmann::json;

std::string joined(const json& list) {
  std::string out;
  for (const auto& item : list) out += (out.empty() ? "" : ", ") + item.get<std::string>();
  return out.empty() ? "none" : out;
}

void print_status(const json& r, const std::string& socket) {
  const auto& d = r.at("daemon");
  const auto& n = r.at("node");
  const auto& p = r.at("policy");
  fmt::print("musterd   {} (git {}), up {:.0f} s, on {}\n", d.at("version").get<std::string>(),
             d.at("git").get<std::string>(), d.at("uptime_s").get<double>(), socket);
  fmt::print("gpus      {}{}\n", n.at("gpus").get<int>(),
             n.at("compute_major").get<int>() > 0
                 ? fmt::format(" (compute capability {}.x)", n.at("compute_major").get<int>())
                 : "");
  fmt::print("network   {}\n", joined(n.at("interfaces")));
  fmt::print("hcas      {}\n", joined(n.at("ib_hcas")));
  fmt::print("policy    NVLS {}, NCCL trace buffer {}\n",
             p.at("nvls_off").get<bool>() ? "off" : "as NCCL decides",
             p.at("trace_buffer").get<int>());
}

int node_status(bool as_json) {
  const auto socket = launcher::daemon_socket();
  if (!socket) {
    fmt::print(stderr, "muster: node status: MUSTER_DAEMON_SOCKET is empty: no daemon to ask\n");
    return kExitUsage;
  }
  std::string why_not;
  const auto reply = launcher::ask_daemon(*socket, R"({"version": 1, "request": "status"})",
                                          std::chrono::milliseconds(2000), why_not);
  if (!reply) {
    fmt::print(stderr, "muster: node status: {} (start it: systemctl start musterd)\n", why_not);
    return kExitFailure;
  }
  const auto r = json::parse(*reply, nullptr, false);
  if (!r.is_object() || r.value("ok", false) != true) {
    fmt::print(stderr, "muster: node status: musterd answered: {}\n", *reply);
    return kExitFailure;
  }
  if (as_json) {
    fmt::print("{}\n", r.dump(2));
    return kExitOk;
  }
  try {
    print_status(r, socket->string());
  } catch (const json::exception& e) {  // a daemon of another version
    fmt::print(stderr, "muster: node status: musterd's reply does not read as a status: {}\n",
               e.what());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_node_verbs(CLI::App& app, verb_action& run) {
  auto* node = app.add_subcommand("node", "ask this node's musterd (MUSTER_DAEMON_SOCKET)");
  node->require_subcommand(1);
  auto as_json = std::make_shared<bool>(false);
  auto* status =
      node->add_subcommand("status", "the daemon, the node's GPUs and network, the site's policy");
  status->add_flag("--json", *as_json, "the daemon's reply as JSON");
  status->callback([as_json, &run] { run = [as_json] { return node_status(*as_json); }; });
}

}  // namespace muster::cli
