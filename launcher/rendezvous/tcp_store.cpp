// The rendezvous store over TCP: see tcp_store.hpp.
#include "launcher/rendezvous/tcp_store.hpp"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <fmt/format.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <list>

#include "common/error.hpp"

namespace muster::launcher::rendezvous {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

enum op : std::uint8_t {
  op_set = 1,
  op_get,
  op_add,
  op_compare_set,
  op_wait,
  op_check,
  op_last_word,  // unless_key, then key, value pairs: kept with the connection
};
enum status : std::uint8_t { status_ok = 0, status_invalid, status_environment, status_io };

constexpr std::uint32_t kMaxBytes = 64u << 20;

// A message: one byte, strings, and (requests) a timeout.
struct message {
  std::uint8_t code = 0;
  std::vector<std::string> strings;
  std::int64_t timeout_ms = 0;
};

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the hosts of one job share byte order (x86, arm)
  out.append(bytes, sizeof(T));
}

std::string encode(const message& m, bool request) {
  std::string out;
  put(out, m.code);
  put(out, static_cast<std::uint32_t>(m.strings.size()));
  for (const auto& s : m.strings) {
    put(out, static_cast<std::uint32_t>(s.size()));
    out += s;
  }
  if (request) put(out, m.timeout_ms);
  return out;
}

template <class T>
T read_value(tcp::socket& socket) {
  T value;
  asio::read(socket, asio::buffer(&value, sizeof(T)));
  return value;
}

// Throws boost::system::system_error on a closed connection, errc::invalid_input on a message
// too large.
message decode(tcp::socket& socket, bool request) {
  message m;
  m.code = read_value<std::uint8_t>(socket);
  auto count = read_value<std::uint32_t>(socket);
  std::uint64_t total = 0;
  MUSTER_CHECK(count <= 1u << 20, errc::invalid_input, "rendezvous: {} strings in one message",
               count);
  for (std::uint32_t i = 0; i < count; ++i) {
    auto size = read_value<std::uint32_t>(socket);
    total += size;
    MUSTER_CHECK(total <= kMaxBytes, errc::invalid_input,
                 "rendezvous: a message over {} bytes", kMaxBytes);
    std::string s(size, '\0');
    asio::read(socket, asio::buffer(s.data(), size));
    m.strings.push_back(std::move(s));
  }
  if (request) m.timeout_ms = read_value<std::int64_t>(socket);
  return m;
}

std::uint8_t status_of(errc category) {
  switch (category) {
    case errc::environment: return status_environment;
    case errc::io: return status_io;
    default: return status_invalid;
  }
}

// One request against the store; the reply's strings.
std::vector<std::string> serve(memory_store& store, const message& m) {
  const milliseconds timeout(m.timeout_ms);
  auto arg = [&m](std::size_t i) -> const std::string& {
    MUSTER_CHECK(i < m.strings.size(), errc::invalid_input, "rendezvous: op {} needs {} argument(s)",
                 static_cast<int>(m.code), i + 1);
    return m.strings[i];
  };
  switch (m.code) {
    case op_set: store.set(arg(0), arg(1)); return {};
    case op_get: return {store.get(arg(0), timeout)};
    case op_add: return {std::to_string(store.add(arg(0), std::stoll(arg(1))))};
    case op_compare_set: return {store.compare_set(arg(0), arg(1), arg(2))};
    case op_wait: store.wait(m.strings, timeout); return {};
    case op_check: return {store.check(m.strings) ? "1" : "0"};
    case op_last_word: return {};  // the connection keeps it (tcp_store_server::impl::connection)
  }
  MUSTER_THROW(errc::invalid_input, "rendezvous: unknown op {}", static_cast<int>(m.code));
}

// A peer whose host went down sends no FIN: TCP keepalive ends the connection after about 25 s
// of silence (10 s idle, then 3 probes 5 s apart). On the server that carries out a client's
// last word; on a client it ends a wait on a store that is gone.
void keep_alive(tcp::socket& socket) {
  boost::system::error_code ec;
  socket.set_option(asio::socket_base::keep_alive(true), ec);
  const int fd = socket.native_handle();
  const int idle = 10, interval = 5, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

struct tcp_store_server::impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread accept_thread;
  std::mutex mutex;
  std::list<std::shared_ptr<tcp::socket>> sockets;  // open connections, to close at the end
  std::list<std::thread> threads;
  std::atomic<bool> stopping{false};

  void connection(std::shared_ptr<tcp::socket> socket, const std::shared_ptr<memory_store>& store) {
    std::vector<std::string> last_word;  // unless_key, key, value, key, value...
    try {
      for (;;) {
        message request = decode(*socket, /*request=*/true);
        message reply;
        try {
          if (request.code == op_last_word) {
            MUSTER_CHECK(request.strings.size() % 2 == 1, errc::invalid_input,
                         "rendezvous: a last word is a key then key, value pairs");
            last_word = request.strings;
          }
          reply.strings = serve(*store, request);
          reply.code = status_ok;
        } catch (const error& e) {
          reply.code = status_of(e.category());
          reply.strings = {e.what()};
        }
        asio::write(*socket, asio::buffer(encode(reply, false)));
      }
    } catch (const std::exception&) {
      // The client went away (or sent garbage): this connection ends, the store stays.
    }
    if (stopping || last_word.empty() || store->check({last_word[0]})) return;
    try {
      for (std::size_t i = 1; i + 1 < last_word.size(); i += 2)
        store->compare_set(last_word[i], "", last_word[i + 1]);
    } catch (const error&) {
      // the store is closing
    }
  }
};

tcp_store_server::tcp_store_server(const std::string& address, int port)
    : impl_(std::make_unique<impl>()), store_(std::make_shared<memory_store>()) {
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  MUSTER_CHECK(!ec, errc::invalid_input, "rendezvous: '{}' is not an IP address", address);
  tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  MUSTER_CHECK(!ec, errc::io,
               "rendezvous: cannot listen on {}:{}: {}; {}", address, port, ec.message(),
               ec == asio::error::address_in_use
                   ? "another program holds that port: use port 0 to let the kernel pick one"
                   : "check that the address belongs to this host");
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept_thread = std::thread([this] {
    for (;;) {
      auto socket = std::make_shared<tcp::socket>(impl_->io);
      boost::system::error_code accept_ec;
      impl_->acceptor.accept(*socket, accept_ec);
      if (impl_->stopping) return;
      if (accept_ec) continue;
      keep_alive(*socket);
      std::lock_guard lock(impl_->mutex);
      impl_->sockets.push_back(socket);
      impl_->threads.emplace_back([this, socket] { impl_->connection(socket, store_); });
    }
  });
}

tcp_store_server::~tcp_store_server() {
  impl_->stopping = true;
  store_->close();  // wakes connections blocked in a wait
  boost::system::error_code ec;
  impl_->acceptor.cancel(ec);
  impl_->acceptor.close(ec);
  // accept() may not notice a closed acceptor on every platform: connect once to wake it.
  try {
    tcp::socket poke(impl_->io);
    poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)), ec);
  } catch (...) {
  }
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  std::lock_guard lock(impl_->mutex);
  for (auto& socket : impl_->sockets) socket->shutdown(tcp::socket::shutdown_both, ec);
  for (auto& thread : impl_->threads) thread.join();
}

struct tcp_store_client::impl {
  asio::io_context io;
  tcp::socket socket{io};
  std::string host;
  int port = 0;
};

tcp_store_client::tcp_store_client(const std::string& host, int port, milliseconds connect_timeout)
    : impl_(std::make_unique<impl>()) {
  impl_->host = host;
  impl_->port = port;
  const auto end = std::chrono::steady_clock::now() + connect_timeout;
  std::string last_error;
  for (;;) {
    boost::system::error_code ec;
    tcp::resolver resolver(impl_->io);
    auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (!ec) asio::connect(impl_->socket, endpoints, ec);
    if (!ec) {
      impl_->socket.set_option(tcp::no_delay(true), ec);
      keep_alive(impl_->socket);  // node 0's host going down ends a wait on it
      return;
    }
    last_error = ec.message();
    impl_->socket.close(ec);
    MUSTER_CHECK(std::chrono::steady_clock::now() < end, errc::environment,
                 "rendezvous: no store at {}:{} after {} ms ({}); is node 0's launcher running, "
                 "and is the port open between the nodes?",
                 host, port, connect_timeout.count(), last_error);
    std::this_thread::sleep_for(milliseconds(50));
  }
}

tcp_store_client::~tcp_store_client() = default;

void tcp_store_client::shutdown() {
  // ::shutdown on the descriptor, not the asio object: another thread may be inside a call.
  ::shutdown(impl_->socket.native_handle(), SHUT_RDWR);
}

std::vector<std::string> tcp_store_client::call(std::uint8_t code,
                                                const std::vector<std::string>& args,
                                                milliseconds timeout) {
  std::lock_guard lock(mutex_);
  message reply;
  try {
    asio::write(impl_->socket, asio::buffer(encode({code, args, timeout.count()}, true)));
    if (reply_slack_.count() > 0) {
      pollfd p{impl_->socket.native_handle(), POLLIN, 0};
      int wait_ms = static_cast<int>(std::min<std::int64_t>(
          (timeout + reply_slack_).count(), std::numeric_limits<int>::max()));
      MUSTER_CHECK(::poll(&p, 1, wait_ms) == 1, errc::io,
                   "rendezvous: no reply from {}:{} within {} ms; is that port muster's store?",
                   impl_->host, impl_->port, wait_ms);
    }
    reply = decode(impl_->socket, /*request=*/false);
  } catch (const boost::system::system_error& e) {
    MUSTER_THROW(errc::io, "rendezvous: lost the store at {}:{}: {}", impl_->host, impl_->port,
                 e.code().message());
  }
  if (reply.code == status_ok) return reply.strings;
  const std::string text = reply.strings.empty() ? "(no message)" : reply.strings.front();
  errc category = reply.code == status_environment ? errc::environment
                  : reply.code == status_io        ? errc::io
                                                   : errc::invalid_input;
  MUSTER_THROW(category, "{} (store at {}:{})", text, impl_->host, impl_->port);
}

void tcp_store_client::set(const std::string& key, const std::string& value) {
  call(op_set, {key, value}, milliseconds(0));
}
std::string tcp_store_client::get(const std::string& key, milliseconds timeout) {
  return call(op_get, {key}, timeout).at(0);
}
std::int64_t tcp_store_client::add(const std::string& key, std::int64_t delta) {
  return std::stoll(call(op_add, {key, std::to_string(delta)}, milliseconds(0)).at(0));
}
std::string tcp_store_client::compare_set(const std::string& key, const std::string& expected,
                                          const std::string& desired) {
  return call(op_compare_set, {key, expected, desired}, milliseconds(0)).at(0);
}
void tcp_store_client::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  call(op_wait, keys, timeout);
}
bool tcp_store_client::check(const std::vector<std::string>& keys) {
  return call(op_check, keys, milliseconds(0)).at(0) == "1";
}

void tcp_store_client::set_last_word(const key_values& writes, const std::string& unless_key) {
  std::vector<std::string> args{unless_key};
  for (const auto& [k, v] : writes) {
    args.push_back(k);
    args.push_back(v);
  }
  call(op_last_word, args, milliseconds(0));
}

}  // namespace muster::launcher::rendezvous
