// The sequence-number board (engine/comm/seq_board.hpp) over a store that answers, and over one
// that stops answering (as c10d's TCPStore server does when its host is SIGSTOPped, or a peer
// stops halfway through a request): publishing never waits, reading gives up at its limit.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/seq_board.hpp"

using namespace std::chrono_literals;
using muster::engine::comm::seq_board;
using clock_type = std::chrono::steady_clock;

namespace {

// A store in memory that can be wedged: every call then blocks until it is released.
class wedgeable_store final : public c10d::Store {
 public:
  void wedge(bool on) {
    {
      std::lock_guard lock(mutex_);
      wedged_ = on;
    }
    released_.notify_all();
  }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    auto lock = enter();
    data_[key] = value;
    ++sets_;
  }
  std::vector<uint8_t> get(const std::string& key) override {
    auto lock = enter();
    return data_.at(key);
  }
  int64_t add(const std::string&, int64_t) override { throw std::logic_error("not used"); }
  bool deleteKey(const std::string&) override { throw std::logic_error("not used"); }
  bool check(const std::vector<std::string>& keys) override {
    auto lock = enter();
    for (const auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  }
  int64_t getNumKeys() override { throw std::logic_error("not used"); }
  void wait(const std::vector<std::string>&) override { throw std::logic_error("not used"); }
  void wait(const std::vector<std::string>&, const std::chrono::milliseconds&) override {
    throw std::logic_error("not used");
  }
  // pure in LibTorch 2.x's c10d::Store, absent in 1.13's: no `override`, so both compile
  c10::intrusive_ptr<c10d::Store> clone() { throw std::logic_error("not used"); }
  int sets() {
    std::lock_guard lock(mutex_);
    return sets_;
  }

 private:
  std::unique_lock<std::mutex> enter() {
    std::unique_lock lock(mutex_);
    released_.wait(lock, [&] { return !wedged_; });
    return lock;
  }
  std::mutex mutex_;
  std::condition_variable released_;
  bool wedged_ = false;
  std::map<std::string, std::vector<uint8_t>> data_;
  int sets_ = 0;
};

}  // namespace

TEST_CASE("the seq board writes each rank's latest number and reads them back", "[seq_board]") {
  auto store = c10::make_intrusive<wedgeable_store>();
  seq_board board(store);
  board.publish("g/seq/0", 1);
  board.publish("g/seq/0", 2);  // replaces 1 if not yet written
  board.publish("g/seq/1", 7);
  const auto seen = board.read({"g/seq/0", "g/seq/1", "g/seq/2"}, 2000ms);
  REQUIRE(seen);
  REQUIRE(seen->size() == 3);
  CHECK((*seen)[0] == 2);
  CHECK((*seen)[1] == 7);
  CHECK_FALSE((*seen)[2].has_value());  // never written
}

TEST_CASE("a store that stops answering holds up the seq board, never the caller", "[seq_board]") {
  auto store = c10::make_intrusive<wedgeable_store>();
  {
    seq_board board(store);
    board.publish("g/seq/0", 1);
    REQUIRE(board.read({"g/seq/0"}, 2000ms));
    store->wedge(true);
    auto start = clock_type::now();
    for (int seq = 2; seq < 10000; ++seq) board.publish("g/seq/0", seq);  // a collective each
    CHECK(clock_type::now() - start < 500ms);
    start = clock_type::now();
    CHECK_FALSE(board.read({"g/seq/0"}, 200ms));
    const auto took = clock_type::now() - start;
    CHECK(took >= 190ms);
    CHECK(took < 1500ms);
    // answering again: the latest number is written (not every one in between), and read
    store->wedge(false);
    const auto seen = board.read({"g/seq/0"}, 2000ms);
    REQUIRE(seen);
    CHECK((*seen)[0] == 9999);
    CHECK(store->sets() < 100);
    store->wedge(true);
    board.publish("g/seq/0", 10000);
    start = clock_type::now();
  }  // the board's thread is blocked in the store: the destructor does not wait for it for long
  store->wedge(false);
}

TEST_CASE("destroying a seq board whose thread is blocked returns within about a second",
          "[seq_board]") {
  auto store = c10::make_intrusive<wedgeable_store>();
  auto board = std::make_unique<seq_board>(store);
  store->wedge(true);
  board->publish("g/seq/0", 1);
  std::this_thread::sleep_for(50ms);  // the thread is in set() now
  const auto start = clock_type::now();
  board.reset();
  const auto took = clock_type::now() - start;
  CHECK(took < 2s);
  store->wedge(false);  // the thread finishes its write and ends on its own
  std::this_thread::sleep_for(50ms);
}
