// The launchers' conversation through the store (node_group, failure_watch) over an in-memory
// store, and the derived port list of store_address.hpp.
#include <catch2/catch.hpp>

#include <poll.h>

#include <future>
#include <thread>
#include <set>

#include "launcher/rendezvous/node_group.hpp"
#include "launcher/rendezvous/store_address.hpp"
#include "tests/support/expect_error.hpp"

using namespace muster::launcher::rendezvous;
using namespace std::chrono_literals;
using muster::test::expect_error;

namespace {

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

const std::vector<std::string> kHosts = {"gpu-a01", "gpu-a02", "gpu-a03"};

}  // namespace

TEST_CASE("derived ports: a fixed list below the ephemeral range, by job and step", "[rendezvous]") {
  auto a = derived_ports(1234, 0);
  REQUIRE(a.size() == static_cast<std::size_t>(kDerivedPortCount));
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i] >= 20000);
    CHECK(a[i] < 30000);
    if (i > 0) CHECK(a[i] == a[i - 1] + 1);
  }
  CHECK(derived_ports(1234, 0) == a);  // every node computes the same list
  CHECK(derived_ports(1235, 0) != a);
  CHECK(derived_ports(1234, 1) != a);
  std::set<int> starts;  // consecutive job ids spread out
  for (std::uint32_t job = 5000; job < 5100; ++job) starts.insert(derived_ports(job, 0).front());
  CHECK(starts.size() > 90);
  CHECK(store_identity{7, 2, 1}.str() == "job 7 step 2 restart 1");
}

TEST_CASE("join waits for every node and returns their facts in node order", "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  std::vector<std::future<std::vector<node_facts>>> joins;
  for (int node = 2; node >= 0; --node)
    joins.push_back(std::async(std::launch::async, [store, node] {
      node_group g(store, node, kHosts);
      return g.join({node, kHosts[static_cast<std::size_t>(node)], 4, 100 + node}, 5s, nullptr);
    }));
  for (auto& j : joins) {
    auto facts = j.get();
    REQUIRE(facts.size() == 3);
    for (int node = 0; node < 3; ++node) {
      CHECK(facts[static_cast<std::size_t>(node)].node == node);
      CHECK(facts[static_cast<std::size_t>(node)].host == kHosts[static_cast<std::size_t>(node)]);
      CHECK(facts[static_cast<std::size_t>(node)].pid == 100 + node);
    }
  }
}

TEST_CASE("a join that times out names the nodes that arrived and the ones that did not",
          "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  store->set("node/2", R"({"host": "gpu-a03", "local_ranks": 4, "pid": 1})");  // node 2 arrived
  auto text = expect_error(muster::errc::environment, [&] {
    node_group(store, 0, kHosts).join({0, "gpu-a01", 4, 2}, 300ms, nullptr);
  });
  CHECK_THAT(text, Catch::Contains("2 of 3 nodes reached the rendezvous within 1 s. Arrived: "
                                   "gpu-a01 (node 0), gpu-a03 (node 2). Missing: gpu-a02 (node 1)"));
  CHECK_THAT(text, Catch::Contains("launch.timeout_rendezvous"));
}

TEST_CASE("a join stops when told to (a signal)", "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  auto text = expect_error(muster::errc::io, [&] {
    node_group(store, 0, kHosts).join({0, "gpu-a01", 4, 2}, 60s, [] { return true; });
  });
  CHECK_THAT(text, Catch::Contains("stopped by a signal"));
}

TEST_CASE("the first failure published stands, later ones get it back", "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  node_group a(store, 0, kHosts), b(store, 1, kHosts);
  CHECK_FALSE(a.failure(0));
  auto first = b.publish_failure(0, {1, "gpu-a02", 5, 3, "rank 5 on gpu-a02 failed first", false});
  CHECK(first.rank == 5);
  auto second = a.publish_failure(0, {0, "gpu-a01", 1, 143, "rank 1 on gpu-a01 failed", false});
  CHECK(second.node == 1);
  CHECK(second.exit_code == 3);
  CHECK(second.what == "rank 5 on gpu-a02 failed first");
  CHECK(a.failure(0)->exit_code == 3);
  CHECK_FALSE(a.failure(1));  // each start (round) has its own
}

TEST_CASE("end_round waits for every node, a node that never ends is named", "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  auto late = std::async(std::launch::async, [store] {
    std::this_thread::sleep_for(50ms);
    node_group(store, 1, {"gpu-a01", "gpu-a02"}).end_round(0, 0, 5s);
  });
  node_group(store, 0, {"gpu-a01", "gpu-a02"}).end_round(0, 0, 5s);
  late.get();
  auto text = expect_error(muster::errc::environment, [&] {
    node_group(store, 0, {"gpu-a01", "gpu-a02"}).end_round(1, 3, 200ms);
  });
  CHECK_THAT(text, Catch::Contains("1 of 2 nodes reached the end of start 1 within 1 s") &&
                       Catch::Contains("Missing: gpu-a02 (node 1). Their launchers did not "
                                       "stop their ranks within launch.kill_grace + 30 s") &&
                       !Catch::Contains("timeout_rendezvous"));
}

TEST_CASE("failure_watch: readable once the round's failure is published, quiet otherwise",
          "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  {
    failure_watch watch(store, [] {}, 0);
    CHECK_FALSE(readable(watch.fd(), 50));
    node_group(store, 1, kHosts).publish_failure(0, {1, "gpu-a02", 2, 3, "x", false});
    CHECK(readable(watch.fd(), 2000));
  }
  {
    // stop() ends a watch that saw nothing; here the store's close() is the interruption
    auto other = std::make_shared<memory_store>();
    failure_watch watch(other, [other] { other->close(); }, 0);
    watch.stop();
    CHECK_FALSE(readable(watch.fd(), 0));
  }
}

TEST_CASE("requeue is asked once, by whichever node saw the signal first", "[rendezvous]") {
  auto store = std::make_shared<memory_store>();
  node_group a(store, 0, kHosts), b(store, 1, kHosts);
  CHECK_FALSE(a.requeue_asked());
  b.ask_requeue("SIGUSR1 on gpu-a02");
  a.ask_requeue("SIGUSR1 on gpu-a01");
  CHECK(a.requeue_asked() == "SIGUSR1 on gpu-a02");
}
