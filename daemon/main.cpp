// musterd: the node daemon. main() only wires the parts together: the configuration (with the
// command line's overrides), the router over the node's facts, the server; errors become one
// line on stderr and exit code 2 (bad options, configuration or socket path) or 1.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "common/error.hpp"
#include "common/log.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/server.hpp"
#include "muster/version.hpp"

namespace {

using namespace muster::daemon;

// The command line's overrides of the configuration's [daemon] section, applied as it is loaded.
struct overrides {
  std::optional<std::string> socket, mode, group, state_dir;
  std::optional<int> request_timeout_ms;
  void operator()(daemon_config& c) const {
    if (socket) c.daemon.socket = *socket;
    if (mode) c.daemon.mode = *mode;
    if (group) c.daemon.group = *group;
    if (request_timeout_ms) c.daemon.request_timeout_ms = *request_timeout_ms;
    if (state_dir) c.daemon.state_dir = *state_dir;
  }
};

int serve(const std::string& config_file, bool required, const overrides& given) {
  const auto config = load_daemon_config(config_file, required, given);
  server_options options;
  options.socket_path = config.daemon.socket;
  options.mode = socket_mode(config);
  options.group = config.daemon.group;
  options.request_deadline = std::chrono::milliseconds(config.daemon.request_timeout_ms);
  options.keep_days = config.daemon.keep_days;
  // SIGHUP: the file again; a bad one keeps what runs ([daemon] changes need a restart)
  const auto started = std::chrono::steady_clock::now();
  auto context_of = [started](const daemon_config& c) {
    auto context = node_context_of(c);
    context.started = started;  // the uptime counts from the start, not the last reload
    return context;
  };
  auto reload = [&]() -> std::shared_ptr<const router> {
    try {
      auto next = load_daemon_config(config_file, required, given);
      return std::make_shared<const router>(context_of(next));
    } catch (const std::exception& e) {
      muster::log::get("daemon")->warn("SIGHUP: {} not loaded, the running configuration stays: {}",
                                       config_file, e.what());
      return nullptr;
    }
  };
  server s(options, std::make_shared<const router>(context_of(config)), reload);
  // after the socket: a second musterd is refused before it touches the store
  s.run(std::make_unique<node_store>(node_store_file(config), config.daemon.keep_days));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "musterd: muster's node daemon (GPU environment policy, preflight, node records)\n"
      "exit codes: 0 stopped by SIGTERM/SIGINT (or --check-config passed), 1 failed, "
      "2 bad options, configuration or socket path",
      "musterd"};
  app.set_version_flag("--version",
                       fmt::format("musterd {} (git {})", muster::kVersion, muster::kGitCommit));
  std::string config_file = kDefaultConfig;
  bool check_only = false;
  overrides given;
  auto* config_opt =
      app.add_option("--config", config_file, "the configuration file")->capture_default_str();
  app.add_flag("--check-config", check_only, "load and check the configuration, print it, exit");
  app.add_option("--socket", given.socket, "overrides daemon.socket");
  app.add_option("--mode", given.mode, "overrides daemon.mode (octal)");
  app.add_option("--group", given.group, "overrides daemon.group");
  app.add_option("--state-dir", given.state_dir, "overrides daemon.state_dir");
  app.add_option("--request-timeout-ms", given.request_timeout_ms,
                 "overrides daemon.request_timeout_ms");
  CLI11_PARSE(app, argc, argv);
  // the default file may be absent (the defaults then); a file named on the command line may not
  const bool required = config_opt->count() > 0;
  try {
    muster::log::setup();
    if (check_only) {
      fmt::print("{}", to_toml(load_daemon_config(config_file, required, given)));
      return 0;
    }
    return serve(config_file, required, given);
  } catch (const muster::error& e) {
    fmt::print(stderr, "musterd: {}\n", e.what());
    const bool bad_input =
        e.category() == muster::errc::invalid_input || e.category() == muster::errc::config;
    return bad_input ? 2 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "musterd: {}\n", e.what());
    return 1;
  }
}
