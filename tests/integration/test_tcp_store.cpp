// The rendezvous store over real loopback sockets (launcher/rendezvous/tcp_store.hpp): many
// clients, blocking waits served while other clients write, timeouts and errors carried back,
// a server that goes away, a port in use.
#include <catch2/catch.hpp>

#include <thread>

#include "launcher/rendezvous/tcp_store.hpp"
#include "tests/support/expect_error.hpp"

using namespace muster::launcher::rendezvous;
using namespace std::chrono_literals;

TEST_CASE("clients on loopback share one store", "[tcp_store]") {
  tcp_store_server server("127.0.0.1", 0);
  REQUIRE(server.port() > 0);
  tcp_store_client a("127.0.0.1", server.port(), 2s);
  tcp_store_client b("localhost", server.port(), 2s);
  a.set("master", "gpu-a01:29500");
  CHECK(b.get("master", 1s) == "gpu-a01:29500");
  std::string id(128, '\0');
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7);
  b.set("nccl_id", id);
  CHECK(a.get("nccl_id", 1s) == id);
  CHECK(a.compare_set("leader", "", "a") == "a");
  CHECK(b.compare_set("leader", "", "b") == "a");
  CHECK(server.store()->get("leader", 0ms) == "a");  // the host's own view, without a socket
}

TEST_CASE("16 clients arrive through add and one wait sees them all", "[tcp_store]") {
  tcp_store_server server("127.0.0.1", 0);
  tcp_store_client watcher("127.0.0.1", server.port(), 2s);
  std::vector<std::thread> nodes;
  for (int n = 0; n < 16; ++n)
    nodes.emplace_back([&server, n] {
      tcp_store_client c("127.0.0.1", server.port(), 2s);
      c.set("node/" + std::to_string(n), "up");
      c.add("arrived", 1);
    });
  std::vector<std::string> keys;
  for (int n = 0; n < 16; ++n) keys.push_back("node/" + std::to_string(n));
  watcher.wait(keys, 5s);  // served while the others write on their own connections
  for (auto& t : nodes) t.join();
  CHECK(watcher.add("arrived", 0) == 16);
}

TEST_CASE("a wait that runs out is an error naming the missing keys", "[tcp_store]") {
  tcp_store_server server("127.0.0.1", 0);
  tcp_store_client c("127.0.0.1", server.port(), 2s);
  c.set("node/0", "up");
  auto message = muster::test::expect_error(muster::errc::environment,
                                            [&] { c.wait({"node/0", "node/1"}, 50ms); });
  CHECK_THAT(message, Catch::Contains("node/1 never came"));
  CHECK_THAT(message, Catch::Contains("(store at 127.0.0.1:" + std::to_string(server.port())));
  CHECK(c.check({"node/0"}));  // the connection is still good after an error
}

TEST_CASE("a store that goes away, or was never there, is a clear error", "[tcp_store]") {
  int port = 0;
  auto client = [&] {
    tcp_store_server server("127.0.0.1", 0);
    port = server.port();
    return std::make_unique<tcp_store_client>("127.0.0.1", port, 2s);
  }();
  CHECK_THAT(muster::test::expect_error(muster::errc::io, [&] { client->set("k", "v"); }),
             Catch::Contains("rendezvous: lost the store at 127.0.0.1:"));
  auto start = std::chrono::steady_clock::now();
  CHECK_THAT(muster::test::expect_error(muster::errc::environment,
                                        [&] { tcp_store_client("127.0.0.1", port, 200ms); }),
             Catch::Contains("no store at 127.0.0.1:" + std::to_string(port) + " after 200 ms"));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("a server whose port is taken says so and how to fix it", "[tcp_store]") {
  tcp_store_server first("127.0.0.1", 0);
  CHECK_THAT(muster::test::expect_error(muster::errc::io,
                                        [&] { tcp_store_server("127.0.0.1", first.port()); }),
             Catch::Contains("another program holds that port: use port 0"));
}

TEST_CASE("a server shuts down while a client waits", "[tcp_store]") {
  auto server = std::make_unique<tcp_store_server>("127.0.0.1", 0);
  tcp_store_client c("127.0.0.1", server->port(), 2s);
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    server.reset();
  });
  auto start = std::chrono::steady_clock::now();
  auto e = muster::test::expect_error([&] { c.wait({"never"}, 30s); });
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK((e.category() == muster::errc::io));
  stopper.join();
}

TEST_CASE("a client's last word is written when its connection ends, unless it said goodbye",
          "[tcp_store]") {
  tcp_store_server server("127.0.0.1", 0);
  tcp_store_client watcher("127.0.0.1", server.port(), 2s);
  {
    tcp_store_client dying("127.0.0.1", server.port(), 2s);
    dying.set_last_word({{"r0/failed", "node 1 is gone"}, {"r0/end/1", "1"}}, "r0/end/1");
    dying.set_last_word({{"r0/failed", "node 1 vanished"}, {"r0/end/1", "1"}}, "r0/end/1");
    watcher.set("r0/failed-before", "x");
    CHECK_FALSE(watcher.check({"r0/failed"}));  // nothing while the client lives
  }  // its connection closes, as when its process is killed
  watcher.wait({"r0/failed", "r0/end/1"}, 2s);
  CHECK(watcher.get("r0/failed", 0ms) == "node 1 vanished");  // the later word replaced the first
  CHECK(watcher.get("r0/end/1", 0ms) == "1");

  watcher.set("r1/failed", "rank 3 failed first");
  {
    tcp_store_client late("127.0.0.1", server.port(), 2s);
    late.set_last_word({{"r1/failed", "node 2 is gone"}, {"r1/end/2", "1"}}, "r1/end/2");
  }
  watcher.wait({"r1/end/2"}, 2s);
  CHECK(watcher.get("r1/failed", 0ms) == "rank 3 failed first");  // a set key is kept

  {
    tcp_store_client polite("127.0.0.1", server.port(), 2s);
    polite.set_last_word({{"r2/failed", "node 3 is gone"}, {"r2/end/3", "1"}}, "r2/end/3");
    polite.set("r2/end/3", "0");  // it ended the round: its last word is void
  }
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(watcher.check({"r2/failed"}));
}
