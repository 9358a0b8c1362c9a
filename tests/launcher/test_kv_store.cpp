// Tests of the rendezvous store in this process (launcher/rendezvous/kv_store.hpp).
#include <catch2/catch.hpp>

#include <thread>

#include "launcher/rendezvous/kv_store.hpp"
#include "tests/support/expect_error.hpp"

using namespace muster::launcher::rendezvous;
using namespace std::chrono_literals;

TEST_CASE("the store sets, gets, adds and compare-sets like c10d's", "[kv_store]") {
  memory_store s;
  s.set("addr", "gpu-a01:41234");
  CHECK(s.get("addr", 0ms) == "gpu-a01:41234");
  CHECK(s.add("arrived", 1) == 1);
  CHECK(s.add("arrived", 2) == 3);
  CHECK(s.compare_set("leader", "", "node-3") == "node-3");    // unset matches ""
  CHECK(s.compare_set("leader", "node-9", "node-4") == "node-3");  // no match: unchanged
  CHECK(s.check({"addr", "arrived"}));
  CHECK_FALSE(s.check({"addr", "missing"}));
  std::string id(128, '\0');
  id[5] = '\xff';
  s.set("nccl_id", id);  // bytes, not text
  CHECK(s.get("nccl_id", 0ms) == id);
}

TEST_CASE("a wait ends when another thread sets the key", "[kv_store]") {
  memory_store s;
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    s.set("b", "2");
  });
  s.set("a", "1");
  CHECK_NOTHROW(s.wait({"a", "b"}, 5s));
  setter.join();
}

TEST_CASE("a wait that runs out names the missing keys", "[kv_store]") {
  memory_store s;
  s.set("node/0", "x");
  auto message = muster::test::expect_error(muster::errc::environment,
                                            [&] { s.wait({"node/0", "node/1"}, 30ms); });
  CHECK_THAT(message, Catch::Contains("waited 30 ms for node/0, node/1 and node/1 never came"));
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [&] { s.add("node/0", 1); }),
             Catch::Contains("add to key 'node/0', which holds a non-number"));
}

TEST_CASE("closing the store wakes its waiters with an error", "[kv_store]") {
  memory_store s;
  std::thread closer([&] {
    std::this_thread::sleep_for(30ms);
    s.close();
  });
  CHECK_THAT(muster::test::expect_error(muster::errc::io, [&] { s.wait({"never"}, 10s); }),
             Catch::Contains("shutting down"));
  closer.join();
}

TEST_CASE("a prefix store keeps its keys apart", "[kv_store]") {
  auto inner = std::make_shared<memory_store>();
  prefix_store a("run-1", inner), b("run-2", inner);
  a.set("x", "1");
  b.set("x", "2");
  CHECK(a.get("x", 0ms) == "1");
  CHECK(inner->get("run-2/x", 0ms) == "2");
  CHECK(a.add("n", 5) == 5);
  CHECK_FALSE(b.check({"n"}));
}
