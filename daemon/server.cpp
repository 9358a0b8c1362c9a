// musterd's server: see server.hpp.
#include "daemon/server.hpp"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/run_store_records.hpp"
#include "daemon/orphan_steps.hpp"
#include "daemon/session.hpp"
#include "daemon/systemd_notify.hpp"

namespace muster::daemon {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

namespace {

// Whether a daemon answers on `path` now, and its pid where the kernel says (SO_PEERCRED).
struct listener {
  bool found = false;
  pid_t pid = 0;
};

listener someone_listens(const std::filesystem::path& path) {
  asio::io_context io;
  stream::socket probe(io);
  boost::system::error_code ec;
  probe.connect(stream::endpoint(path.string()), ec);
  // only a refused connection means nobody listens (EACCES and the like prove nothing)
  listener l{ec != asio::error::connection_refused, 0};
  ucred cred{};
  socklen_t len = sizeof cred;
  if (!ec && ::getsockopt(probe.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
    l.pid = cred.pid;
  return l;
}

// How to stop the daemon that holds the socket: systemd's unit where systemd runs, or its pid.
std::string stop_hint(pid_t pid) {
  std::error_code ec;
  const bool systemd = std::filesystem::is_directory("/run/systemd/system", ec);
  if (pid > 0)
    return systemd ? fmt::format("systemctl stop musterd, or kill {}", pid)
                   : fmt::format("kill {}", pid);
  return systemd ? "systemctl stop musterd, or kill it" : "kill it";
}

// Makes way for the socket: its directory exists, and a stale socket file of a dead daemon goes.
void prepare_path(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (!std::filesystem::exists(path, ec)) return;
  MUSTER_CHECK(std::filesystem::is_socket(path, ec), errc::config,
               "{} exists and is not a socket: give musterd another --socket path, or remove the "
               "file",
               path.string());
  const auto other = someone_listens(path);
  MUSTER_CHECK(!other.found, errc::config,
               "another musterd{} is already serving {}: stop it first ({}), or give this one "
               "another --socket path",
               other.pid > 0 ? fmt::format(" (pid {})", other.pid) : "", path.string(),
               stop_hint(other.pid));
  std::filesystem::remove(path, ec);
}

void set_access(const server_options& o) {
  const auto path = o.socket_path.string();
  MUSTER_CHECK(::chmod(path.c_str(), o.mode) == 0, errc::io, "chmod {:o} {}: {}", o.mode, path,
               std::strerror(errno));
  if (o.group.empty()) return;
  const ::group* g = ::getgrnam(o.group.c_str());
  if (!g) return;  // the configuration's warnings said so (daemon_config.hpp)
  if (::chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) == 0) return;
  const int why = errno;
  // a daemon of an ordinary user may give its socket only to a group of its own
  MUSTER_CHECK(why == EPERM && ::geteuid() != 0, errc::io, "chown :{} {}: {}", o.group, path,
               std::strerror(why));
  log::get("daemon")->warn(
      "{} keeps the daemon's group: uid {} is not root and not in group {} (daemon.group); give "
      "--group one of its own groups (id -Gn), or --group \"\" to say so",
      path, ::geteuid(), o.group);
}

peer credentials_of(stream::socket& s) {
  ::ucred cred{};
  ::socklen_t size = sizeof cred;
  if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) return {};
  return {cred.pid, cred.uid, cred.gid};
}

}  // namespace

server::server(server_options options, std::shared_ptr<const router> first, reload_fn reload)
    : options_(std::move(options)),
      router_(std::move(first)),
      reload_(std::move(reload)),
      signals_(io_, SIGTERM, SIGINT, SIGHUP),
      acceptor_(io_),
      retry_(io_),
      prune_(io_) {
  prepare_path(options_.socket_path);
  boost::system::error_code ec;
  acceptor_.open(stream(), ec);
  if (!ec) acceptor_.bind(stream::endpoint(options_.socket_path.string()), ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  MUSTER_CHECK(!ec, errc::io, "musterd cannot listen on {}: {}", options_.socket_path.string(),
               ec.message());
  try {
    set_access(options_);
  } catch (...) {  // no socket left behind that nobody serves
    std::error_code removed;
    std::filesystem::remove(options_.socket_path, removed);
    throw;
  }
}

server::~server() {
  std::error_code ec;
  std::filesystem::remove(options_.socket_path, ec);
}

void server::run(std::unique_ptr<node_store> store) {
  store_ = std::move(store);
  close_orphans();  // what ended while no musterd ran (before any request: this thread alone)
  accept();
  wait_signal();
  prune_later();
  asio::steady_timer watchdog(io_);
  const auto interval = watchdog_interval();
  std::function<void()> ping = [&] {
    if (!interval) return;
    notify("WATCHDOG=1");
    watchdog.expires_after(*interval);
    watchdog.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) ping();
    });
  };
  ping();
  log::get("daemon")->info("listening on {}", options_.socket_path.string());
  notify("READY=1");
  io_.run();
  notify("STOPPING=1");
  store_thread_.join();  // the work under way finishes; its reply goes nowhere
}

void server::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, stream::socket s) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // out of descriptors (or memory): wait a little instead of spinning on the error
      log::get("daemon")->warn("accept on {}: {}; retrying in 100 ms",
                               options_.socket_path.string(), ec.message());
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](const boost::system::error_code& e) {
        if (!e) accept();
      });
      return;
    }
    const auto who = credentials_of(s);
    std::make_shared<session>(
        std::move(s), who, [this] { return router_; },
        [this](store_work work, std::function<void(std::string)> done) {
          run_work(std::move(work), std::move(done));
        },
        options_.request_deadline)
        ->start();
    accept();
  });
}

void server::run_work(store_work work, std::function<void(std::string)> done) {
  if (pending_work_.fetch_add(1) >= kMaxPendingWork) {
    pending_work_.fetch_sub(1);
    done(error_reply("busy", fmt::format("musterd has {} requests waiting for its store; try "
                                         "again in a moment",
                                         kMaxPendingWork)));
    return;
  }
  asio::post(store_thread_, [this, work = std::move(work), done = std::move(done)] {
    auto reply = work(*store_);
    pending_work_.fetch_sub(1);
    done(std::move(reply));
  });
}

void server::close_orphans() {
  try {
    if (const int closed = close_orphan_steps(*store_, store::now_ms()); closed > 0)
      log::get("daemon")->info(
          "node store: {} step(s) whose launcher is gone, without their end recorded, marked "
          "cancelled",
          closed);
  } catch (const std::exception& e) {
    log::get("daemon")->warn("node store: closing steps whose launcher is gone failed: {}",
                             e.what());
  }
}

void server::prune_later() {
  prune_.expires_after(std::chrono::hours(6));
  prune_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    asio::post(store_thread_, [this] {
      try {
        store_->prune(options_.keep_days);
      } catch (const std::exception& e) {
        log::get("daemon")->warn("node store: pruning old records failed: {}", e.what());
      }
      close_orphans();
    });
    prune_later();
  });
}

void server::wait_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    if (signal == SIGHUP) {
      if (auto next = reload_ ? reload_() : nullptr) {
        router_ = std::move(next);
        log::get("daemon")->info("SIGHUP: configuration reloaded");
      }
      wait_signal();
      return;
    }
    log::get("daemon")->info("{}: stopping", strsignal(signal));
    io_.stop();
  });
}

}  // namespace muster::daemon
