// musterd's server: owns the io_context, the signals and the unix-socket acceptor (Asio's HTTP
// server example, cut down), and the node store with the one thread that uses it. Every session
// runs on the io thread, so the router needs no lock; requests that touch the store (or wait on
// Slurm) run on the store thread, one at a time, so they never hold up the others.
// SIGTERM and SIGINT stop it; SIGHUP asks `reload` for a new router (null keeps the old one).
// Tells systemd READY=1 once listening, WATCHDOG=1 at half the watchdog interval, STOPPING=1.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <atomic>
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
  int keep_days = 90;  // the node store's records; pruned at start and every 6 hours
};

// Requests waiting for the store thread at most; more are answered "busy" at once, so a flood
// of slow requests (each may wait on Slurm) cannot queue without bound.
inline constexpr int kMaxPendingWork = 256;

class server {
 public:
  using reload_fn = std::function<std::shared_ptr<const router>()>;

  // Binds the socket (a stale file of a dead daemon is replaced; a live daemon on it is an
  // error naming the path). Throws errc::io or errc::config with the path and the fix.
  server(server_options options, std::shared_ptr<const router> first, reload_fn reload);
  ~server();

  // Serves until SIGTERM or SIGINT, with `store` for the requests that use it; removes the
  // socket file before it returns.
  void run(std::unique_ptr<node_store> store);

 private:
  void accept();
  void wait_signal();

  void run_work(store_work work, std::function<void(std::string)> done);
  void prune_later();
  // Closes the node store's steps whose launcher is gone (orphan_steps.hpp), logging how many.
  void close_orphans();

  server_options options_;
  std::shared_ptr<const router> router_;
  reload_fn reload_;
  std::unique_ptr<node_store> store_;  // used on store_thread_ only
  boost::asio::io_context io_;
  boost::asio::thread_pool store_thread_{1};  // declared after io_: joined before it goes
  boost::asio::signal_set signals_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // accept again after a failed accept
  boost::asio::steady_timer prune_;  // the node store's next prune
  std::atomic<int> pending_work_{0};
};

}  // namespace muster::daemon
