// seq_board: see seq_board.hpp.
#include "engine/comm/seq_board.hpp"

#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace muster::engine::comm {

using values = std::vector<std::optional<std::int64_t>>;

struct seq_board::state {
  struct read_job {
    std::vector<std::string> keys;
    std::promise<values> result;
  };

  c10::intrusive_ptr<c10d::Store> store;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::int64_t> unwritten;
  std::deque<std::shared_ptr<read_job>> reads;
  bool stop = false;
  bool exited = false;

  // The thread: writes what was published, then answers reads (so a read sees this rank's own
  // numbers), until stopped. A store error ends a write or a read quietly: the board is advice.
  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stop || !unwritten.empty() || !reads.empty(); });
      if (stop) break;
      auto writes = std::move(unwritten);
      unwritten.clear();
      auto jobs = std::move(reads);
      reads.clear();
      lock.unlock();
      for (const auto& [key, seq] : writes) {
        const auto text = std::to_string(seq);
        try {
          store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
        } catch (const std::exception&) {
        }
      }
      for (const auto& job : jobs) answer(*job);
      lock.lock();
    }
    exited = true;
    changed.notify_all();
  }

  void answer(read_job& job) {
    values out;
    try {
      for (const auto& key : job.keys) {
        if (!store->check({key})) {
          out.emplace_back();
          continue;
        }
        const auto bytes = store->get(key);
        out.emplace_back(std::stoll(std::string(bytes.begin(), bytes.end())));
      }
      job.result.set_value(std::move(out));
    } catch (...) {
      job.result.set_exception(std::current_exception());
    }
  }
};

seq_board::seq_board(c10::intrusive_ptr<c10d::Store> store) : state_(std::make_shared<state>()) {
  state_->store = std::move(store);
  std::thread([s = state_] { s->run(); }).detach();
}

seq_board::~seq_board() {
  std::unique_lock lock(state_->mutex);
  state_->stop = true;
  state_->changed.notify_all();
  state_->changed.wait_for(lock, std::chrono::seconds(1), [&] { return state_->exited; });
}

void seq_board::publish(const std::string& key, std::int64_t seq) {
  {
    std::lock_guard lock(state_->mutex);
    state_->unwritten[key] = seq;
  }
  state_->changed.notify_all();
}

std::optional<values> seq_board::read(const std::vector<std::string>& keys,
                                      std::chrono::milliseconds limit) {
  auto job = std::make_shared<state::read_job>();
  job->keys = keys;
  auto result = job->result.get_future();
  {
    std::lock_guard lock(state_->mutex);
    state_->reads.push_back(job);
  }
  state_->changed.notify_all();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  try {
    return result.get();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace muster::engine::comm
