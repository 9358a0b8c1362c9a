// musterd: the node daemon. main() only wires the parts together: the configuration (with the
// command line's overrides), the router over the node's facts, the server; errors become one
// line on stderr and exit code 2 (bad options, configuration or socket path) or 1.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/writable_dir.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/server.hpp"
#include "muster/version.hpp"

namespace {

using namespace muster::daemon;

// The command line's overrides of the configuration's [daemon] section, applied as it is loaded.
struct overrides {
  std::optional<std::string> socket, mode, group, state_dir;
  std::optional<int> request_timeout_ms;
  void operator()(daemon_config& c, muster::config::sources& where) const {
    set(socket, c.daemon.socket, "daemon.socket", "--socket", where);
    set(mode, c.daemon.mode, "daemon.mode", "--mode", where);
    set(group, c.daemon.group, "daemon.group", "--group", where);
    set(request_timeout_ms, c.daemon.request_timeout_ms, "daemon.request_timeout_ms",
        "--request-timeout-ms", where);
    set(state_dir, c.daemon.state_dir, "daemon.state_dir", "--state-dir", where);
  }
  // An option given replaces the key's value and its place in messages.
  template <class T>
  static void set(const std::optional<T>& given, T& value, const char* key, const char* option,
                  muster::config::sources& where) {
    if (!given) return;
    value = *given;
    where[key] = fmt::format("command line {}", option);
  }
};

// What the start checks and builds before it binds the socket: the configuration, the socket's
// options and the router's context (the node's facts: a node.gpu_description that cannot be read
// fails here). --check-config runs exactly this, so it passes only what the start accepts.
struct prepared {
  daemon_config config;
  std::vector<std::string> warnings;  // what the configuration names that the host lacks
  server_options options;
  node_context context;
};

prepared prepare(const std::string& config_file, bool required, const overrides& given,
                 std::chrono::steady_clock::time_point started) {
  prepared p;
  p.config = load_daemon_config(config_file, required, given, &p.warnings);
  p.options.socket_path = p.config.daemon.socket;
  p.options.mode = socket_mode(p.config);
  p.options.group = p.config.daemon.group;
  p.options.request_deadline = std::chrono::milliseconds(p.config.daemon.request_timeout_ms);
  p.options.keep_days = p.config.daemon.keep_days;
  p.context = node_context_of(p.config);
  p.context.started = started;  // the uptime counts from the start, not the last reload
  return p;
}

// Holds <state_dir>/musterd.lock for the process's life: one musterd a state directory (a
// second one, on another socket, would interleave its records with the first's). Throws
// errc::config naming the other daemon and the fix.
void lock_state_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec) && std::filesystem::create_directories(dir, ec))
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  const auto file = dir / "musterd.lock";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;  // the store's own open says what is wrong with the directory
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const auto n = ::pread(fd, pid, sizeof pid - 1, 0);
    std::string other(pid, n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!other.empty() && (other.back() == '\n' || other.back() == ' ')) other.pop_back();
    ::close(fd);
    MUSTER_THROW(muster::errc::config,
                 "another musterd{} uses the state directory {} (daemon.state_dir): stop it "
                 "first, or give this one another --state-dir",
                 other.empty() ? "" : " (pid " + other + ")", dir.string());
  }
  const auto mine = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, mine.data(), mine.size(), 0) < 0) {
    // the pid is for the message above only
  }
}  // fd stays open, and the lock held, until the process ends

// What --check-config says beside the start's own checks: whether this user could make and
// write the socket's directory and daemon.state_dir, which the start does only after the socket
// is bound (as another user, the start may see otherwise).
std::vector<std::string> directory_warnings(const daemon_config& c) {
  std::vector<std::string> out;
  const auto check = [&](std::string_view key, const std::string& value,
                         const std::filesystem::path& dir, std::string_view what) {
    if (const auto why = muster::unwritable_dir(dir); !why.empty())
      out.push_back(
          fmt::format("{} = {}: {}, so musterd as this user (uid {}) could not keep {} "
                      "there; choose a directory it can write",
                      key, value, why, ::geteuid(), what));
  };
  check("daemon.socket", c.daemon.socket, std::filesystem::path(c.daemon.socket).parent_path(),
        "its socket");
  check("daemon.state_dir", c.daemon.state_dir, c.daemon.state_dir, "its node store and lock");
  return out;
}

int serve(const std::string& config_file, bool required, const overrides& given) {
  const auto started = std::chrono::steady_clock::now();
  auto first = prepare(config_file, required, given, started);
  auto logger = muster::log::get("daemon");
  for (const auto& w : first.warnings) logger->warn("{}", w);
  // SIGHUP: the file again; a bad one keeps what runs ([daemon] changes need a restart)
  auto reload = [&]() -> std::shared_ptr<const router> {
    try {
      const auto next = prepare(config_file, required, given, started);
      for (const auto& w : next.warnings) muster::log::get("daemon")->warn("SIGHUP: {}", w);
      if (const auto changed = daemon_keys_changed(first.config, next.config); !changed.empty())
        muster::log::get("daemon")->warn(
            "SIGHUP: {} changed: [daemon] keys take effect at the next start (systemctl restart "
            "musterd); the rest is applied now",
            changed);
      return std::make_shared<const router>(next.context);
    } catch (const std::exception& e) {
      muster::log::get("daemon")->warn("SIGHUP: {} not loaded, the running configuration stays: {}",
                                       config_file, e.what());
      return nullptr;
    }
  };
  server s(first.options, std::make_shared<const router>(first.context), reload);
  lock_state_dir(first.config.daemon.state_dir);  // after the socket: a second musterd on it
                                                  // is refused before it touches anything
  std::error_code ec;
  logger->info("musterd {}: configuration {}; node store {}", muster::kVersion,
               std::filesystem::exists(config_file, ec)
                   ? config_file
                   : fmt::format("{} is absent: the defaults", config_file),
               node_store_file(first.config).string());
  // after the socket: a second musterd is refused before it touches the store
  s.run(std::make_unique<node_store>(node_store_file(first.config), first.config.daemon.keep_days));
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "musterd: {}; see musterd --help\n", e.what());
    return 2;  // bad options, as the man page says (CLI11's own codes are 100 and up)
  }
  // the default file may be absent (the defaults then); a file named on the command line may not
  const bool required = config_opt->count() > 0;
  try {
    muster::log::setup();
    if (check_only) {
      auto checked = prepare(config_file, required, given, {});
      for (auto& w : directory_warnings(checked.config)) checked.warnings.push_back(std::move(w));
      for (const auto& w : checked.warnings) fmt::print(stderr, "musterd: warning: {}\n", w);
      fmt::print("{}", to_toml(checked.config));
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
