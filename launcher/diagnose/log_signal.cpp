// One log line read for what it says about a failure: see log_signal.hpp.
#include "launcher/diagnose/log_signal.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <initializer_list>

namespace muster::launcher::diagnose {
namespace {

// The text after `key` up to the first of `ends` (or the line's end), trimmed; "" when `key`
// is not in `line`.
std::string after(std::string_view line, std::string_view key, std::string_view ends) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return "";
  auto rest = line.substr(at + key.size());
  rest = rest.substr(0, rest.find_first_of(ends));
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '.')) rest.remove_suffix(1);
  return std::string(rest);
}

// The text after `key` up to the earliest of the strings `ends` (or the line's end), trimmed;
// "" when `key` is not in `line`.
std::string between(std::string_view line, std::string_view key,
                    std::initializer_list<std::string_view> ends) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return "";
  auto rest = line.substr(at + key.size());
  std::size_t cut = rest.size();
  for (auto end : ends) cut = std::min(cut, rest.find(end));
  rest = rest.substr(0, cut);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return std::string(rest);
}

std::optional<int> number_at(std::string_view s) {
  int value = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  if (r.ec != std::errc() || r.ptr == s.data()) return std::nullopt;
  return value;
}

void put(log_signal& s, const char* key, std::string value) {
  if (!value.empty()) s.facts[key] = std::move(value);
}

// PyTorch's CUDA OOM, every generation:
//   1.x/2.0: "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.90 GiB total capacity;
//             14.93 GiB already allocated; 11.75 MiB free; 15.05 GiB reserved in total by
//             PyTorch)"
//   2.1+:    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of
//             79.15 GiB of which 1.23 GiB is free. Process 4242 has 40.1 GiB memory in use.
//             Including non-PyTorch memory, this process has 37.8 GiB memory in use. Of the
//             allocated memory 35.0 GiB is allocated by PyTorch, and 1.27 GiB is reserved by
//             PyTorch but unallocated."
log_signal cuda_oom(std::string_view line) {
  log_signal s{"cuda_oom", std::nullopt, {}};
  put(s, "tried_to_allocate", between(line, "Tried to allocate ", {" (", ". ", ";"}));
  if (line.find("total capacity;") != std::string_view::npos) {  // the older form
    put(s, "gpu", after(line, "(GPU ", ";"));
    put(s, "capacity", after(line, "; ", ";"));
    const auto capacity = s.facts["capacity"];
    if (capacity.ends_with(" total capacity"))
      s.facts["capacity"] = capacity.substr(0, capacity.size() - 15);
    const auto fields = line.substr(line.find("total capacity;"));
    auto field = [&](std::string_view suffix) {
      const auto at = fields.find(suffix);
      if (at == std::string_view::npos) return std::string();
      const auto start = fields.rfind(';', at);
      return std::string(fields.substr(start + 2, at - start - 2));
    };
    put(s, "allocated", field(" already allocated"));
    put(s, "free", field(" free"));
    put(s, "reserved", field(" reserved in total by PyTorch"));
  } else {
    put(s, "gpu", after(line, "GPU ", " "));
    put(s, "capacity", between(line, "total capacity of ", {" of which"}));
    put(s, "free", between(line, "of which ", {" is free"}));
    put(s, "this_process", between(line, "this process has ", {" memory"}));
    put(s, "allocated", between(line, "Of the allocated memory ", {" is allocated"}));
    put(s, "reserved_unallocated", between(line, "PyTorch, and ", {" is reserved by PyTorch"}));
    // other processes on the GPU: "Process 4242 has 40.1 GiB memory in use"
    std::string others;
    for (auto at = line.find("Process "); at != std::string_view::npos;
         at = line.find("Process ", at + 8)) {
      const auto end = line.find(" memory in use", at);
      if (end == std::string_view::npos) break;
      others += (others.empty() ? "" : "; ") + std::string(line.substr(at, end - at));
    }
    put(s, "other_processes", others);
  }
  return s;
}

// "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1042,
//  OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012
//  milliseconds before timing out."
log_signal nccl_timeout(std::string_view line) {
  log_signal s{"nccl_timeout", std::nullopt, {}};
  put(s, "seq", after(line, "SeqNum=", ",)"));
  put(s, "op", after(line, "OpType=", ",)"));
  put(s, "numel_in", after(line, "NumelIn=", ",)"));
  put(s, "timeout_ms", after(line, "Timeout(ms)=", ",)"));
  put(s, "ran_ms", between(line, "ran for ", {" "}));
  if (auto r = after(line, "[Rank ", "]"); !r.empty())
    if (auto n = number_at(r)) s.rank = *n;
  return s;
}

}  // namespace

std::span<const std::string_view> signal_keywords() {
  static constexpr std::string_view kWords[] = {"CUDA out of memory",
                                                "Watchdog caught collective operation timeout",
                                                "DUE TO TIME LIMIT",
                                                "oom_kill event",
                                                ": Out Of Memory",
                                                "Out of memory: Killed process",
                                                "NVRM: Xid",
                                                "fallen off the bus",
                                                "uncorrectable ECC error",
                                                "unhandled system error",
                                                "shared memory segment",
                                                "ddress already in use"};
  return kWords;
}

std::optional<int> rank_of_line(std::string_view line) {
  for (std::string_view prefix : {"[rank", "[default"}) {
    if (!line.starts_with(prefix)) continue;
    auto rest = line.substr(prefix.size());
    if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (auto n = number_at(rest)) return n;
  }
  // srun -l: "3: text" (a number, a colon, a space)
  std::size_t digits = 0;
  while (digits < line.size() && digits < 7 &&
         std::isdigit(static_cast<unsigned char>(line[digits])))
    ++digits;
  if (digits > 0 && line.substr(digits).starts_with(": ")) return number_at(line);
  return std::nullopt;
}

std::optional<log_signal> match_log_line(std::string_view line) {
  std::optional<log_signal> s;
  if (line.find("CUDA out of memory") != std::string_view::npos) {
    s = cuda_oom(line);
  } else if (line.find("Watchdog caught collective operation timeout") != std::string_view::npos) {
    s = nccl_timeout(line);
  } else if (line.find("DUE TO TIME LIMIT") != std::string_view::npos &&
             line.find("CANCELLED AT") != std::string_view::npos) {
    s = log_signal{"slurm_time_limit", std::nullopt, {}};
    put(*s, "at", after(line, "CANCELLED AT ", " "));
    put(*s, "job", after(line, "*** JOB ", " "));
    put(*s, "step", after(line, "*** STEP ", " "));
    put(*s, "host", after(line, " ON ", " "));
  } else if (line.find("oom_kill event") != std::string_view::npos ||
             line.find(": Out Of Memory") != std::string_view::npos ||
             line.find("Out of memory: Killed process") != std::string_view::npos) {
    s = log_signal{"host_oom_kill", std::nullopt, {}};
    put(*s, "step", after(line, "StepId=", " ."));
    put(*s, "killed", after(line, "Killed process ", "("));
    if (auto task = after(line, "task ", ":"); !task.empty())
      if (auto n = number_at(task)) s->rank = *n;
  } else if (line.find("NVRM: Xid") != std::string_view::npos ||
             line.find("fallen off the bus") != std::string_view::npos ||
             line.find("uncorrectable ECC error") != std::string_view::npos) {
    s = log_signal{"gpu_hardware_fault", std::nullopt, {}};
    put(*s, "pci", after(line, "(PCI:", ")"));
    put(*s, "xid", after(line, "): ", ","));
  } else if (line.find("unhandled system error") != std::string_view::npos ||
             (line.find("NCCL WARN") != std::string_view::npos &&
              line.find("shared memory segment") != std::string_view::npos)) {
    s = log_signal{"nccl_system_error", std::nullopt, {}};
    if (line.find("/dev/shm") != std::string_view::npos ||
        line.find("shm") != std::string_view::npos)
      s->facts["sub_cause"] = "shared memory";
    else if (line.find("socket") != std::string_view::npos ||
             line.find("Connection") != std::string_view::npos)
      s->facts["sub_cause"] = "network";
  } else if (line.find("ddress already in use") != std::string_view::npos) {
    s = log_signal{"rendezvous_port_in_use", std::nullopt, {}};
    put(*s, "port", after(line, "port: ", " ,)"));
  }
  if (s && !s->rank) s->rank = rank_of_line(line);
  return s;
}

}  // namespace muster::launcher::diagnose
