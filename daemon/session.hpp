// One client connection of musterd: reads request lines, answers each through the router,
// closes on a line over the size limit (after saying so), on a client that sends no full line
// or does not take its reply within the deadline, and when the client goes away. Owns its socket;
// lives as long as an operation on it is pending (shared_from_this).
#pragma once

#include <sys/types.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "daemon/router.hpp"

namespace muster::daemon {

// Who is on the other end, from SO_PEERCRED at accept.
struct peer {
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

class session : public std::enable_shared_from_this<session> {
 public:
  using socket = boost::asio::local::stream_protocol::socket;

  // `current` gives the router of the moment (SIGHUP may replace it between requests).
  session(socket s, peer who, std::function<std::shared_ptr<const router>()> current,
          std::chrono::milliseconds deadline);
  void start();

 private:
  void read_line();
  void on_line(const boost::system::error_code& ec, std::size_t bytes);
  void write_reply(std::string reply, bool close_after);
  void arm_deadline();

  socket socket_;
  peer peer_;
  std::function<std::shared_ptr<const router>()> current_;
  std::chrono::milliseconds deadline_;
  boost::asio::steady_timer timer_;
  boost::asio::streambuf buffer_;
  std::string reply_;
};

}  // namespace muster::daemon
