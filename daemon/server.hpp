// musterd's server: owns the io_context, the signals and the unix-socket acceptor (Asio's HTTP
// server example, cut down). One thread; every session runs on it, so the router needs no lock.
// SIGTERM and SIGINT stop it; SIGHUP asks `reload` for a new router (null keeps the old one).
// Tells systemd READY=1 once listening, WATCHDOG=1 at half the watchdog interval, STOPPING=1.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "daemon/router.hpp"

namespace muster::daemon {

struct server_options {
  std::filesystem::path socket_path = "/run/muster/musterd.sock";
  unsigned mode = 0660;  // of the socket file
  std::string group;     // the socket file's group ("" leaves it the daemon's)
  std::chrono::milliseconds request_deadline{5000};  // for a client to send a full line
};

class server {
 public:
  using reload_fn = std::function<std::shared_ptr<const router>()>;

  // Binds the socket (a stale file of a dead daemon is replaced; a live daemon on it is an
  // error naming the path). Throws errc::io or errc::config with the path and the fix.
  server(server_options options, std::shared_ptr<const router> first, reload_fn reload);
  ~server();

  // Serves until SIGTERM or SIGINT; removes the socket file before it returns.
  void run();

 private:
  void accept();
  void wait_signal();

  server_options options_;
  std::shared_ptr<const router> router_;
  reload_fn reload_;
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // accept again after a failed accept
};

}  // namespace muster::daemon
