// One client connection of musterd: see session.hpp.
#include "daemon/session.hpp"

#include <fmt/format.h>

#include <istream>

#include "common/log.hpp"
#include "daemon/protocol.hpp"

namespace muster::daemon {

namespace asio = boost::asio;

session::session(socket s, peer who, std::function<std::shared_ptr<const router>()> current,
                 work_runner run_work, std::chrono::milliseconds deadline)
    : socket_(std::move(s)),
      peer_(who),
      current_(std::move(current)),
      run_work_(std::move(run_work)),
      deadline_(deadline),
      timer_(socket_.get_executor()),
      // one byte over the limit, so an oversize line shows as a full buffer, not a long wait
      buffer_(kMaxRequestBytes + 1) {}

void session::start() {
  read_line();
}

void session::arm_deadline() {
  timer_.expires_after(deadline_);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    // cancelled, or re-armed after it fired (a line came in time, or a reply went out)
    if (ec || self->timer_.expiry() > std::chrono::steady_clock::now()) return;
    log::get("daemon")->debug(
        "client pid {} did not send a full request or read its reply "
        "within {} ms: closed",
        self->peer_.pid, self->deadline_.count());
    boost::system::error_code ignored;
    self->socket_.close(ignored);
  });
}

void session::read_line() {
  arm_deadline();
  asio::async_read_until(
      socket_, buffer_, '\n',
      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t bytes) {
        self->on_line(ec, bytes);
      });
}

void session::on_line(const boost::system::error_code& ec, std::size_t bytes) {
  timer_.cancel();
  if (ec == asio::error::not_found) {  // the buffer filled before a newline
    write_reply(error_reply("too_large", fmt::format("a request line is at most {} bytes; this "
                                                     "connection is closed",
                                                     kMaxRequestBytes)),
                true);
    return;
  }
  if (ec) return;  // the client went away (or the deadline closed the socket)
  std::string line(asio::buffers_begin(buffer_.data()),
                   asio::buffers_begin(buffer_.data()) + static_cast<std::ptrdiff_t>(bytes - 1));
  buffer_.consume(bytes);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  auto routed = current_()->route(line, peer_);
  if (!routed.work) {
    write_reply(std::move(routed.reply), false);
    return;
  }
  run_work_(std::move(routed.work), [self = shared_from_this()](std::string reply) {
    asio::post(self->socket_.get_executor(), [self, reply = std::move(reply)]() mutable {
      self->write_reply(std::move(reply), false);
    });
  });
}

void session::write_reply(std::string reply, bool close_after) {
  reply_ = std::move(reply) + "\n";
  arm_deadline();  // a client that does not read its replies is closed too
  asio::async_write(
      socket_, asio::buffer(reply_),
      [self = shared_from_this(), close_after](const boost::system::error_code& ec, std::size_t) {
        self->timer_.cancel();
        if (ec || close_after) {
          boost::system::error_code ignored;
          self->socket_.close(ignored);
          return;
        }
        self->read_line();
      });
}

}  // namespace muster::daemon
