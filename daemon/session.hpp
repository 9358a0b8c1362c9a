// One client connection of musterd: reads request lines, answers each through the router,
// closes on a line over the size limit (after saying so), on a client that sends no full line
// or does not take its reply within the deadline, and when the client goes away. Owns its socket;
// lives as long as an operation on it is pending (shared_from_this). A request that needs the
// store waits for the store thread; the connection reads its next line after the reply.
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

// Runs store work on the store thread, then calls `done` with its reply (on that thread).
using work_runner = std::function<void(store_work work, std::function<void(std::string)> done)>;

class session : public std::enable_shared_from_this<session> {
 public:
  using socket = boost::asio::local::stream_protocol::socket;

  // `current` gives the router of the moment (SIGHUP may replace it between requests);
  // `run_work` runs what the router hands to the store thread.
  session(socket s, peer who, std::function<std::shared_ptr<const router>()> current,
          work_runner run_work, std::chrono::milliseconds deadline);
  void start();

 private:
  void read_line();
  void on_line(const boost::system::error_code& ec, std::size_t bytes);
  void write_reply(std::string reply, bool close_after);
  void arm_deadline();

  socket socket_;
  peer peer_;
  std::function<std::shared_ptr<const router>()> current_;
  work_runner run_work_;
  std::chrono::milliseconds deadline_;
  boost::asio::steady_timer timer_;
  boost::asio::streambuf buffer_;
  std::string reply_;
};

}  // namespace muster::daemon
