// musterd: the node daemon. main() only wires the parts together: options, the node's facts,
// the router, the server; errors become one line on stderr and exit code 2 (bad input) or 1.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/node_network.hpp"
#include "daemon/server.hpp"
#include "muster/version.hpp"

namespace {

// What musterd knows of its node at start. GPUs come from NVML (not built yet: none here).
muster::daemon::node_context probe_node() {
  muster::daemon::node_context c;
  auto network = muster::probe_node_network();
  c.node.interfaces = std::move(network.interfaces);
  c.node.ib_hcas = std::move(network.ib_hcas);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "musterd: muster's node daemon (GPU environment policy, preflight, node records)\n"
      "exit codes: 0 stopped by SIGTERM/SIGINT, 1 failed, 2 bad options or socket path",
      "musterd"};
  app.set_version_flag("--version",
                       fmt::format("musterd {} (git {})", muster::kVersion, muster::kGitCommit));
  muster::daemon::server_options options;
  std::string socket = options.socket_path.string(), mode = "0660";
  int deadline_ms = static_cast<int>(options.request_deadline.count());
  app.add_option("--socket", socket, "the unix socket to serve")->capture_default_str();
  app.add_option("--mode", mode, "the socket file's mode, octal")->capture_default_str();
  app.add_option("--group", options.group, "the socket file's group (e.g. muster)");
  app.add_option("--request-timeout-ms", deadline_ms,
                 "how long a client may take to send a full request line")
      ->capture_default_str()
      ->check(CLI::Range(1, 3'600'000));
  CLI11_PARSE(app, argc, argv);
  try {
    muster::log::setup();
    options.socket_path = socket;
    std::size_t used = 0;
    options.mode = static_cast<unsigned>(std::stoul(mode, &used, 8));
    MUSTER_CHECK(used == mode.size() && options.mode <= 0777, muster::errc::invalid_input,
                 "--mode {}: expected an octal file mode such as 0660", mode);
    options.request_deadline = std::chrono::milliseconds(deadline_ms);
    auto first = std::make_shared<const muster::daemon::router>(probe_node());
    muster::daemon::server server(options, std::move(first), nullptr);
    server.run();
    return 0;
  } catch (const muster::error& e) {
    fmt::print(stderr, "musterd: {}\n", e.what());
    const bool bad_input =
        e.category() == muster::errc::invalid_input || e.category() == muster::errc::config;
    return bad_input ? 2 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "musterd: {}\n", e.what());
    return e.what() == std::string_view("stoul") ? 2 : 1;
  }
}
