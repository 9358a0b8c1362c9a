// PyTorch's profiler over a range of steps: see step_profiler.hpp.
#include "engine/train/step_profiler.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>
#include <torch/version.h>

#if __has_include(<kineto/ActivityType.h>)  // LibTorch with Kineto: which events are GPU work
#include <kineto/ActivityType.h>
#define MUSTER_KINETO_TYPES 1
#endif

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

namespace muster::engine::train {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// An event's start and duration in microseconds (LibTorch 2 counts nanoseconds, 1.13 micro).
struct event_times {
  double start_us, duration_us;
};

event_times times_of(const profiler::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return {double(e.startNs()) / 1e3, double(e.durationNs()) / 1e3};
#else
  return {double(e.startUs()), double(e.durationUs())};
#endif
}

// Kernels, copies and fills on the GPU: not the GPU-side copies of user ranges or the sync
// events Kineto also puts on the device (they span the kernels and would count them twice).
bool gpu_work(const profiler::KinetoEvent& e) {
#ifdef MUSTER_KINETO_TYPES
  const auto type = static_cast<libkineto::ActivityType>(e.activityType());
  return type == libkineto::ActivityType::CONCURRENT_KERNEL ||
         type == libkineto::ActivityType::GPU_MEMCPY || type == libkineto::ActivityType::GPU_MEMSET;
#else
  return e.deviceType() != c10::DeviceType::CPU;
#endif
}

std::set<ActivityType> activities(bool cuda) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (cuda) a.insert(ActivityType::CUDA);
  return a;
}

struct totals {
  std::int64_t calls = 0;
  double us = 0;
};

void table(fmt::memory_buffer& out, const std::vector<profile_event>& events, bool gpu,
           const char* heading, double wall_ms, std::size_t rows) {
  std::map<std::string, totals> by_name;
  double all_us = 0;
  for (const auto& e : events) {
    if (e.gpu != gpu) continue;
    auto& t = by_name[e.name];
    ++t.calls;
    t.us += e.us;
    all_us += e.us;
  }
  if (by_name.empty()) return;
  std::vector<std::pair<std::string, totals>> sorted(by_name.begin(), by_name.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  fmt::format_to(std::back_inserter(out), "{} ({:.1f} ms in all):\n", heading, all_us / 1e3);
  fmt::format_to(std::back_inserter(out), "  {:>8} {:>11} {:>7} {:>10}  {}\n", "calls", "total ms",
                 "of wall", "mean us", "name");
  for (std::size_t i = 0; i < std::min(rows, sorted.size()); ++i) {
    const auto& t = sorted[i].second;
    const std::string_view name = sorted[i].first;  // long kernel names cut at 100
    fmt::format_to(std::back_inserter(out), "  {:>8} {:>11.3f} {:>6.1f}% {:>10.1f}  {}{}\n",
                   t.calls, t.us / 1e3, wall_ms > 0 ? 100 * t.us / 1e3 / wall_ms : 0.0,
                   t.us / double(t.calls), name.substr(0, 100), name.size() > 100 ? "..." : "");
  }
}

// The time the GPU did anything: the union of its activities' intervals.
double gpu_busy_us(const std::vector<profile_event>& events) {
  std::vector<std::pair<double, double>> spans;
  for (const auto& e : events)
    if (e.gpu) spans.emplace_back(e.start_us, e.start_us + e.us);
  std::sort(spans.begin(), spans.end());
  double busy = 0, end = 0;
  bool open = false;
  for (const auto& [from, to] : spans) {
    if (!open || from > end) {
      busy += to - from;
      end = to;
      open = true;
    } else if (to > end) {
      busy += to - end;
      end = to;
    }
  }
  return busy;
}

void busy_line(fmt::memory_buffer& out, const std::vector<profile_event>& events, double wall_ms) {
  const bool any_gpu =
      std::any_of(events.begin(), events.end(), [](const auto& e) { return e.gpu; });
  if (!any_gpu || wall_ms <= 0) return;
  const double busy_ms = gpu_busy_us(events) / 1e3, share = busy_ms / wall_ms;
  const char* verdict =
      share < 0.5    ? "the GPU waits for the host most of the time: the steps are bound by the "
                       "host (kernel launches, the work between them, synchronisations), so fewer "
                       "and larger kernels help more than faster ones"
      : share < 0.85 ? "the GPU waits for the host part of the time"
                     : "the steps are bound by the GPU's work";
  fmt::format_to(std::back_inserter(out),
                 "GPU busy {:.1f} ms of the {:.1f} ms ({:.0f}%): {} (the profiler slows the host, "
                 "so without it the share is higher)\n",
                 busy_ms, wall_ms, 100 * share, verdict);
}

}  // namespace

std::string profile_summary(const std::vector<profile_event>& events, const std::string& what,
                            double wall_ms, std::size_t rows) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "{}: {:.1f} ms of wall time\n", what, wall_ms);
  busy_line(out, events, wall_ms);
  table(out, events, true, "GPU kernels, copies and fills by total time", wall_ms, rows);
  table(out, events, false, "CPU ops by total time (each including the ops it calls)", wall_ms,
        rows);
  return fmt::to_string(out);
}

step_profiler::step_profiler(int first, int last, std::filesystem::path folder, int rank, bool cuda)
    : first_(first),
      last_(last > 0 ? last : first),
      folder_(std::move(folder)),
      rank_(rank),
      cuda_(cuda) {}

step_profiler::~step_profiler() {
  if (!running_) return;
  try {
    profiler::disableProfiler();
  } catch (...) {  // a profile cut short by an exception is dropped
  }
}

void step_profiler::before_step(int number) {
  // from the first step of the range this run reaches (a run resumed inside it starts there)
  if (first_ <= 0 || done_ || running_ || number < first_ || number > last_) return;
  from_ = number;
  const ProfilerConfig config(ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities(cuda_));
  profiler::enableProfiler(config, activities(cuda_));
  running_ = true;
  started_ = std::chrono::steady_clock::now();
}

std::string step_profiler::after_step(int number) {
  if (!running_ || number < last_) return {};
  return finish(number);
}

std::string step_profiler::finish(int last_done) {
  if (!running_) return {};
  if (cuda_) torch::cuda::synchronize();
  done_ = true;
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_)
          .count();
  running_ = false;
  auto result = profiler::disableProfiler();
  std::vector<profile_event> events;
  for (const auto& e : result->events()) {
    const bool gpu = e.deviceType() != c10::DeviceType::CPU;
    if (gpu && !gpu_work(e)) continue;
    const auto t = times_of(e);
    events.push_back({e.name(), gpu, t.duration_us, t.start_us});
  }
  auto steps = from_ == last_done ? fmt::format("step {}", from_)
                                  : fmt::format("steps {}..{}", from_, last_done);
  if (last_done < last_) steps += fmt::format(" (the run ended before step {})", last_);
  auto summary =
      profile_summary(events, fmt::format("profile of {} on rank {}", steps, rank_), wall_ms);
  // A profile that cannot be written is reported, not fatal: the run goes on.
  std::error_code ec;
  std::filesystem::create_directories(folder_, ec);
  const auto text = folder_ / fmt::format("rank-{}.txt", rank_);
  std::ofstream file(text);
  file << summary;
  file.close();
  if (ec || !file)
    return summary + fmt::format(
                         "profile not written: cannot write {}{}{}; make the folder "
                         "writable (train.profile_step_start)",
                         text.string(), ec ? ": " : "", ec ? ec.message() : "");
  const auto trace = folder_ / fmt::format("rank-{}.json", rank_);
  std::string trace_line;
  try {
    result->save(trace.string());
    trace_line = fmt::format("Chrome trace {} (https://ui.perfetto.dev)", trace.string());
  } catch (const c10::Error&) {
    trace_line = "no Chrome trace: this muster-train's LibTorch has no Kineto (Debian's has not)";
  }
  return summary + fmt::format("profile written to {}; {}", text.string(), trace_line);
}

}  // namespace muster::engine::train
