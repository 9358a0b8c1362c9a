// The handle every backend gives for a collective it started and left running: the first
// wait() runs `finish` (waits, at most the group's timeout, and throws the collective's error
// line), then `done` (what follows on this rank, e.g. a copy back into the caller's tensor).
// A failure is rethrown by every later wait, not only the first. Destroyed before a wait that
// finished, it runs `abandon` (releasing what `finish` would have).
#pragma once

#include <exception>
#include <functional>
#include <utility>

#include "engine/comm/communicator.hpp"

namespace muster::engine::comm {

class pending_call final : public pending_collective {
 public:
  pending_call(std::function<void()> finish, std::function<void()> done,
               std::function<void()> abandon = nullptr)
      : finish_(std::move(finish)), done_(std::move(done)), abandon_(std::move(abandon)) {}
  ~pending_call() override {
    if (!waited_ && abandon_) abandon_();
  }
  pending_call(const pending_call&) = delete;
  pending_call& operator=(const pending_call&) = delete;

  void wait() override {
    if (failure_) std::rethrow_exception(failure_);
    if (waited_) return;
    try {
      finish_();
    } catch (...) {
      failure_ = std::current_exception();
      throw;
    }
    done_();
    waited_ = true;
  }

 private:
  std::function<void()> finish_, done_, abandon_;
  bool waited_ = false;
  std::exception_ptr failure_;
};

}  // namespace muster::engine::comm
