// The rendezvous store over TCP: node 0's launcher runs a tcp_store_server on a port the kernel
// picks (or a given one), the other launchers talk to it with tcp_store_client. Boost.Asio with
// blocking sockets: one thread accepts, one thread serves each connection (a launcher per node,
// so at most a few thousand).
//
// Wire format, both ways: u8 op-or-status, u32 count, then count strings each as u32 length
// and bytes, then (requests only) i64 timeout in ms. All integers little-endian. A request of
// more than 64 MiB is refused and the connection closed.
// Not here: finding the server's address (PMIx, a file in the run directory, the job id).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/rendezvous/kv_store.hpp"

namespace muster::launcher::rendezvous {

class tcp_store_server {
 public:
  // Listens on address:port (port 0: the kernel picks one). Throws errc::io naming the address
  // and port, and what to do, when it cannot (a port in use, an address not on this host).
  tcp_store_server(const std::string& address, int port);
  // Stops accepting, wakes and ends every connection, and joins its threads.
  ~tcp_store_server();
  tcp_store_server(const tcp_store_server&) = delete;
  tcp_store_server& operator=(const tcp_store_server&) = delete;

  int port() const { return port_; }
  // The store it serves (for the hosting launcher's own use, without a socket).
  std::shared_ptr<memory_store> store() const { return store_; }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::shared_ptr<memory_store> store_;
  int port_ = 0;
};

class tcp_store_client final : public kv_store {
 public:
  // Connects to host:port, retrying until connect_timeout (the server may start later).
  // Throws errc::environment naming host, port and the time tried when it cannot.
  tcp_store_client(const std::string& host, int port, milliseconds connect_timeout);
  ~tcp_store_client() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  // Kept by the server with this connection and carried out when the connection ends.
  void set_last_word(const key_values& writes, const std::string& unless_key) override;

  // Waits at most `slack` beyond a request's own timeout for its reply, then throws errc::io
  // (for probing a port that may belong to some other program); 0 = wait as long as it takes.
  void set_reply_slack(milliseconds slack) { reply_slack_ = slack; }
  // Ends the connection: a call blocked in another thread, and every later call, throws
  // errc::io. Safe to call from any thread.
  void shutdown();

 private:
  std::vector<std::string> call(std::uint8_t op, const std::vector<std::string>& args,
                                milliseconds timeout);
  struct impl;
  std::unique_ptr<impl> impl_;
  std::mutex mutex_;  // one request at a time on the connection
  milliseconds reply_slack_{0};
};

}  // namespace muster::launcher::rendezvous
