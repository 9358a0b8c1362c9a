// PyTorch's profiler over a range of training steps (train.profile_step_start..end): where a
// step's time goes, op by op and CUDA kernel by kernel, in the rank's log and in files beside
// the run, the way torch.profiler and Megatron's --profile are used to find a slow step's cause.
// Each rank writes <folder>/rank-<r>.txt (the summary) and, where its LibTorch has Kineto (the
// GPU machine's PyTorch; Debian's has not), the Chrome trace <folder>/rank-<r>.json.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace muster::engine::train {

// One profiled event: an op on the CPU (its time includes the ops it calls) or a GPU activity
// (a kernel, copy or fill; these do not nest on one stream, and streams overlap).
struct profile_event {
  std::string name;
  bool gpu = false;
  double us = 0;
  double start_us = 0;  // on the profiler's clock
};

// The busiest `rows` names by total time, GPU activities and CPU ops in two tables, with calls,
// total ms, share of `wall_ms` and mean us; a heading names `what`. With GPU activities, a line
// first says how much of the wall time the GPU was busy (the union of their intervals over every
// stream) and so whether the steps are bound by the GPU or by the host.
std::string profile_summary(const std::vector<profile_event>& events, const std::string& what,
                            double wall_ms, std::size_t rows = 20);

class step_profiler {
 public:
  // Profiles steps first..last (numbered from 1; last 0 = first alone; first 0 = never), CUDA
  // activities too when `cuda`.
  step_profiler(int first, int last, std::filesystem::path folder, int rank, bool cuda);
  ~step_profiler();
  step_profiler(const step_profiler&) = delete;
  step_profiler& operator=(const step_profiler&) = delete;

  // Before step `number` runs: starts at the first step of the range the run reaches (a run
  // resumed inside the range profiles the rest of it).
  void before_step(int number);
  // After step `number` ran: at the last, stops, writes the files and returns what to log (the
  // summary and where the files are); empty at every other step.
  std::string after_step(int number);
  // When the run ends inside the range (train.steps reached, or stopped by a signal) after
  // step `last_done`: the same for the steps profiled so far; empty when none were.
  std::string finish(int last_done);

 private:
  int first_, last_;
  std::filesystem::path folder_;
  int rank_;
  bool cuda_;
  bool running_ = false, done_ = false;
  int from_ = 0;  // the first step profiled
  std::chrono::steady_clock::time_point started_;
};

}  // namespace muster::engine::train
