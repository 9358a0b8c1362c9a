// One log line read for what it says about a failure: see log_signal.hpp.
#include "launcher/diagnose/log_signal.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>

#include "launcher/diagnose/line_fields.hpp"
#include "launcher/launcher_lines.hpp"

namespace muster::launcher::diagnose {
namespace {

void put(log_signal& s, const char* key, std::string value) {
  if (!value.empty()) s.facts[key] = std::move(value);
}

log_signal signal_of(const char* category) {
  return log_signal{category, std::nullopt, {}};
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
//   and a kernel or library that could not get memory: "CUDA error: out of memory".
log_signal cuda_oom(std::string_view line) {
  auto s = signal_of("cuda_oom");
  put(s, "tried_to_allocate", between(line, "Tried to allocate ", {" (", ". ", ";"}));
  if (has(line, "total capacity;")) {  // the older form
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
  } else if (has(line, "total capacity of")) {
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

// NCCL's own allocations failing: "NCCL WARN Cuda failure 'out of memory'", "NCCL WARN Failed
// to CUDA calloc 2097152 bytes", "NCCL WARN Call to cuMemCreate failed ...
// CUDA_ERROR_OUT_OF_MEMORY".
log_signal nccl_oom(std::string_view line) {
  auto s = signal_of("nccl_oom");
  put(s, "bytes", between(line, "calloc ", {" bytes"}));
  if (s.facts.empty()) put(s, "bytes", between(line, "malloc ", {" bytes"}));
  if (has(line, "cuMem")) s.facts["call"] = "cuMem (NVLS or user buffers)";
  return s;
}

// ProcessGroupNCCL's watchdog, and the engine's own collective error line:
//   "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1042,
//    OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012
//    milliseconds before timing out."
//   "[Rank 3] Timeout at NCCL work: 1042, last enqueued NCCL work: 1042, last completed NCCL
//    work: 1041."
//   "[rank 1/4 group world] all_reduce seq=12 bytes=4096 timed out after 600000 ms; not
//    arrived: 3 (at seq 11) (...)"
// and, where the engine's collective failed before its timeout (a peer's connection closed),
//   "... seq=12 bytes=4096 failed after 812 ms (timeout 600000 ms); not arrived: none (...)
//    (<the backend's error>)"
// (before 2026-11-27 the engine said "failed after at most 600000 ms" for both).
// Gloo's (torch's CPU backend) own: "RuntimeError: [../third_party/gloo/gloo/transport/tcp/
// unbound_buffer.cc:81] Timed out waiting 15000ms for recv operation to complete".
bool gloo_timeout_line(std::string_view line) {
  return has(line, "gloo") && has(line, "Timed out waiting ") &&
         has(line, " operation to complete");
}

// Gloo's end of a connection a peer closed: "[../third_party/gloo/gloo/transport/tcp/pair.cc:
// 598] Connection closed by peer [10.0.0.1]:54321", "... Read error [10.0.0.1]:54321:
// Connection reset by peer".
bool gloo_peer_gone_line(std::string_view line) {
  return has(line, "gloo") &&
         (has(line, "Connection closed by peer") || has(line, "Connection reset by peer"));
}

// A host allocation the worker itself saw fail: Python's "MemoryError" (numpy's "MemoryError:
// Unable to allocate 7.45 GiB for an array ..."), PyTorch's "DefaultCPUAllocator: can't
// allocate memory: you tried to allocate 8000000000 bytes", C++'s "std::bad_alloc". Not
// torch.OutOfMemoryError, which is CUDA's.
bool host_memory_line(std::string_view line) {
  if (has(line, "DefaultCPUAllocator: can't allocate memory") || has(line, "std::bad_alloc") ||
      has(line, "._ArrayMemoryError: "))  // numpy's MemoryError
    return true;
  const auto at = line.find("MemoryError");
  if (at == std::string_view::npos) return false;
  const auto end = at + 11;
  const bool word_start = at == 0 || line[at - 1] == ' ' || line[at - 1] == ':' ||
                          line[at - 1] == ']' || line[at - 1] == '.';
  const bool word_end = end == line.size() || line[end] == ':';
  return word_start && word_end && !has(line.substr(0, at), "OutOf");
}

log_signal host_memory_error(std::string_view line) {
  auto s = signal_of("host_memory_error");
  put(s, "tried_to_allocate", between(line, "tried to allocate ", {" bytes"}));
  if (!s.facts.count("tried_to_allocate"))
    put(s, "tried_to_allocate", between(line, "Unable to allocate ", {" for "}));
  return s;
}

// The ranks the engine's line says never arrived: "rank 2 (at seq 439), rank 3 (no collective
// yet) (Connection closed by peer)" gives "rank 2, 3"; "none (...)" gives "none".
std::string not_arrived(std::string_view line) {
  const auto at = line.find("not arrived: ");
  if (at == std::string_view::npos) return "";
  auto rest = line.substr(at + 13);
  if (!rest.starts_with("rank ")) return between(line, "not arrived: ", {" ("});
  std::vector<int> ranks;
  while (rest.starts_with("rank ")) {
    const auto n = number_at(rest.substr(5));
    if (!n) break;
    ranks.push_back(*n);
    const auto next = rest.find(", rank ");
    if (next == std::string_view::npos) break;
    rest.remove_prefix(next + 2);
  }
  return fmt::format("rank {}", fmt::join(ranks, ", "));
}

log_signal nccl_timeout(std::string_view line) {
  auto s = signal_of("nccl_timeout");
  if (gloo_timeout_line(line)) {
    s.facts["backend"] = "gloo";
    put(s, "op", between(line, "ms for ", {" operation"}));  // the transfer: recv or send
    put(s, "timeout_ms", between(line, "Timed out waiting ", {"ms"}));
    return s;
  }
  if (engine_collective_line(line)) {
    put(s, "seq", after(line, " seq=", " "));
    put(s, "bytes", after(line, " bytes=", " "));
    if (has(line, "failed after at most ")) {
      put(s, "timeout_ms", between(line, "failed after at most ", {" ms"}));
    } else if (has(line, "timed out after ")) {
      put(s, "timeout_ms", between(line, "timed out after ", {" ms"}));
    } else {
      put(s, "failed_ms", between(line, "failed after ", {" ms"}));
      put(s, "timeout_ms", between(line, "(timeout ", {" ms"}));
      put(s, "error", last_group(line));
    }
    put(s, "not_arrived", not_arrived(line));
    const auto group = line.find(" group ");
    if (group != std::string_view::npos) {
      const auto op = line.find("] ", group);
      if (op != std::string_view::npos) put(s, "op", after(line.substr(op), "] ", " "));
      put(s, "group", after(line, " group ", "]"));
    }
    if (auto r = after(line, "[rank ", "/]"); !r.empty())
      if (auto n = number_at(r)) s.rank = *n;
    return s;
  }
  put(s, "seq", after(line, "SeqNum=", ",)"));
  put(s, "op", after(line, "OpType=", ",)"));
  put(s, "numel_in", after(line, "NumelIn=", ",)"));
  put(s, "timeout_ms", after(line, "Timeout(ms)=", ",)"));
  put(s, "ran_ms", between(line, "ran for ", {" "}));
  put(s, "last_enqueued", after(line, "last enqueued NCCL work: ", ","));
  put(s, "last_completed", after(line, "last completed NCCL work: ", ","));
  if (!s.facts.count("seq")) put(s, "seq", after(line, "Timeout at NCCL work: ", ","));
  if (auto r = after(line, "[Rank ", "]"); !r.empty())
    if (auto n = number_at(r)) s.rank = *n;
  if (auto r = after(line, " Rank ", "]"); !s.rank && !r.empty())  // "[PG 0 Rank 3]"
    if (auto n = number_at(r)) s.rank = *n;
  return s;
}

// The heartbeat monitor and a stuck watchdog (PyTorch 2.2+), and muster's own hang detection:
//   "[PG 0 Rank 3] Heartbeat monitor timed out! Process will be terminated after dumping debug
//    info. workMetaList_.size()=1"
//   "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in
//    monitoring enqueued collectives."
//   "muster: rank 3 is hung: SIGABRT sent; last heartbeats: ..."
log_signal hang(std::string_view line) {
  auto s = signal_of("hang_watchdog_stuck");
  put(s, "stuck_s", between(line, "got stuck for ", {" seconds"}));
  if (has(line, " is hung: ")) {
    std::optional<int> hung;
    if (auto r = between(line, "rank ", {" is hung"}); !r.empty()) hung = number_at(r);
    return muster_hang_signal(line, hung);
  } else if (auto r = after(line, " Rank ", "]"); !r.empty()) {
    if (auto n = number_at(r)) s.rank = *n;
  }
  return s;
}

// c10d's line for a host name no resolver knows, for IPv4 or any family: the IPv6 line is a
// warning healthy runs print too (c10d tries IPv6 first, then IPv4 answers).
bool unresolved_host(std::string_view line) {
  return (has(line, "The IPv4 network addresses of (") ||
          has(line, "The network addresses of (")) &&
         has(line, "cannot be retrieved") &&
         (has(line, "Name or service not known") ||
          has(line, "Temporary failure in name resolution"));
}

// muster's launchers that did not meet within launch.timeout_rendezvous, after the launcher's
// "muster: " (launcher/rendezvous/node_group.cpp and launcher/slurm_launch.cpp write them):
//   "rendezvous: 2 of 3 nodes reached the rendezvous within 60 s. Arrived: gpu-a01 (node 0),
//    gpu-a03 (node 2). Missing: gpu-a02 (node 1). Check that ... can resolve and reach gpu-a01
//    (node 0; else set launch.master_addr ...) ..."
//   "rendezvous: no rendezvous store of job 42 step 0 found within 60 s: ... Check that node 0's
//    launcher (gpu-a01) is running (its output), that 10.0.0.1 resolves and is reachable from
//    gpu-a02 (or set launch.master_addr), or raise launch.timeout_rendezvous"
// Not the end of a start ("... nodes reached the end of start 0 within ..."): a node that does
// not end its ranks after a failure, whose own lines or Slurm's say why.
bool launchers_rendezvous_line(std::string_view line) {
  return has(line, "rendezvous: ") &&
         (has(line, " nodes reached the rendezvous within ") ||
          (has(line, "rendezvous: no rendezvous store of ") && has(line, " found within ")));
}

// The host names of node_group's list: "gpu-a02 (node 1), gpu-a04 (node 3) and 5 more".
std::vector<std::string> listed_nodes(std::string_view list) {
  std::vector<std::string> hosts;
  for (auto at = list.find(" (node "); at != std::string_view::npos; at = list.find(" (node ")) {
    hosts.emplace_back(list.substr(0, at));
    const auto next = list.find("), ", at);
    if (next == std::string_view::npos) break;
    list.remove_prefix(next + 3);
  }
  return hosts;
}

void launchers_rendezvous(log_signal& s, std::string_view line) {
  s.facts["source"] = "muster";
  put(s, "timeout_s", between(line, " within ", {" s. ", " s:"}));
  put(s, "reached", between(line, "rendezvous: ", {" nodes reached"}));
  put(s, "arrived", between(line, ". Arrived: ", {". Missing: "}));
  put(s, "missing", between(line, ". Missing: ", {". Check"}));
  put(s, "node0", between(line, "resolve and reach ", {" (node 0"}));
  if (!has(line, "no rendezvous store of ")) {
    if (const auto missing = s.facts.find("missing"); missing != s.facts.end())
      s.hosts = listed_nodes(missing->second);  // the nodes to look at
    return;
  }
  s.facts.erase("reached");
  put(s, "node0", between(line, "node 0's launcher (", {")"}));
  put(s, "address", between(line, "), that ", {" resolves"}));
  put(s, "from", between(line, "reachable from ", {" ("}));
  if (const auto from = s.facts.find("from"); from != s.facts.end()) s.hosts = {from->second};
}

// c10d's TCPStore and the elastic rendezvous not coming together:
//   "The client socket has timed out after 600000ms while trying to connect to (10.0.0.1, 29500)"
//   "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2
//    clients joined."
//   "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
//   "Timed out initializing process group in store based barrier on rank: 0, ..."
//   "RuntimeError: connect() timed out. Original timeout was 1800000 ms."
//   the engine's "[rank 1/2] cannot reach the rendezvous store at 10.0.0.1:29500: ..."
//   "RuntimeError: Socket Timeout" (Gloo's process group, its peers not connecting in time)
// and a host name that does not resolve, which c10d says once a try until its timeout:
//   "[c10d] The IPv4 network addresses of (n1, 29500) cannot be retrieved (gai error: -2 - Name
//    or service not known)."
log_signal rendezvous_timeout(std::string_view line) {
  auto s = signal_of("rendezvous_timeout");
  if (launchers_rendezvous_line(line)) {
    launchers_rendezvous(s, line);
    return s;
  }
  if (unresolved_host(line)) {
    put(s, "unresolved", between(line, "addresses of (", {",", ")"}));
    put(s, "address", between(line, "addresses of (", {")"}));
    put(s, "resolver", between(line, "(gai error: ", {")"}));
    return s;
  }
  put(s, "address", between(line, "trying to connect to (", {")"}));
  if (s.facts.empty()) put(s, "address", between(line, "rendezvous store at ", {": ", " "}));
  put(s, "joined", between(line, "seconds waiting for clients. ", {" clients joined"}));
  put(s, "after", between(line, "timed out after ", {" while"}));
  return s;
}

// Whether an "NVRM: Xid (PCI:...): N, ..." line names a fault of the GPU or its links rather
// than of the program (13, 31, 43: the application's; 45: the driver cleaning up after a killed
// process): NVIDIA's Xid catalogue.
bool hardware_xid(std::string_view line) {
  const auto n = number_at(after(line, "): ", ","));
  if (!n) return false;
  static constexpr int kHardware[] = {48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154};
  for (int x : kHardware)
    if (*n == x) return true;
  return false;
}

// The number of the signal srun names a task's end by: strsignal(3)'s English words ("User
// defined signal 1", "Segmentation fault (core dumped)"); nullopt for other words.
std::optional<int> signal_of_words(std::string_view words) {
  if (words.ends_with(" (core dumped)")) words.remove_suffix(14);
  for (int n = 1; n < NSIG; ++n)
    if (const char* d = ::sigdescr_np(n); d && words == d) return n;
  return std::nullopt;
}

// torchelastic's agent on a worker that failed:
//   "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid:
//    280966) of binary: /usr/bin/python3"
// and Slurm's srun on a task: "srun: error: gpu-a07: task 3: Killed", "srun: error: gpu-a07:
// task 3: Exited with exit code 1". Signal 9 is worker_killed_sigkill, anything else
// worker_failed_see_error_file.
std::optional<log_signal> worker_exit(std::string_view line) {
  if (has(line, "failed (exitcode: ")) {
    const auto code = number_at(after(line, "failed (exitcode: ", ")"));
    auto s = signal_of(code == -9 ? "worker_killed_sigkill" : "worker_failed_see_error_file");
    if (code) s.facts["exit_code"] = std::to_string(*code);
    put(s, "local_rank", after(line, "local_rank: ", " "));
    put(s, "pid", after(line, "(pid: ", ")"));
    return s;
  }
  if (has(line, "srun: error: ") && (has(line, ": task ") || has(line, ": tasks "))) {
    // "srun: error: gpu-a07: task 3: Killed", "srun: error: gpu-a07: tasks 0-7: Exited with
    // exit code 1", "... tasks 0,2: Aborted (core dumped)"
    const auto tasks_at = line.find(": task");
    auto rest = line.substr(tasks_at + 6);
    if (rest.starts_with("s")) rest.remove_prefix(1);
    rest.remove_prefix(std::min<std::size_t>(1, rest.size()));
    const auto colon = rest.find(": ");
    if (colon == std::string_view::npos) return std::nullopt;
    const auto tasks = rest.substr(0, colon);
    std::string_view status = rest.substr(colon + 2);
    while (!status.empty() && status.back() == ' ') status.remove_suffix(1);
    if (status == "Terminated" || status.ends_with("exit code 0")) return std::nullopt;  // stopped
    const bool killed = status == "Killed";
    const auto signal_number = signal_of_words(status);
    if (!killed && !status.starts_with("Exited with exit code") && !signal_number &&
        status.find_first_of("0123456789") != std::string_view::npos)
      return std::nullopt;  // not a task's end
    auto s = signal_of(killed ? "worker_killed_sigkill" : "worker_failed_see_error_file");
    if (killed)
      s.facts["signal"] = "9";
    else if (!status.starts_with("Exited")) {
      s.facts["signal_name"] = std::string(status);
      if (signal_number) s.facts["signal"] = std::to_string(*signal_number);
    }
    put(s, "exit_code", after(status, "exit code ", " "));
    put(s, "host", between(line, "srun: error: ", {": task"}));
    s.facts["srun_tasks"] = std::string(tasks);  // ranks, or launchers (diagnoser::srun_tasks)
    // the ranks: "3", "0-7", "0,2-3"
    std::size_t at = 0;
    while (at < tasks.size()) {
      const auto comma = std::min(tasks.find(',', at), tasks.size());
      const auto item = tasks.substr(at, comma - at);
      const auto dash = item.find('-');
      const auto lo = number_at(item.substr(0, dash));
      const auto hi = dash == std::string_view::npos ? lo : number_at(item.substr(dash + 1));
      if (lo && hi && *hi >= *lo && *hi - *lo < 100000)
        for (int r = *lo; r <= *hi; ++r) {
          if (!s.rank)
            s.rank = r;
          else
            s.more_ranks.push_back(r);
        }
      at = comma + 1;
    }
    return s;
  }
  if (has(line, "Signal 9 (SIGKILL) received by PID")) {
    auto s = signal_of("worker_killed_sigkill");
    s.facts["signal"] = "9";
    put(s, "pid", after(line, "received by PID ", " "));
    return s;
  }
  return std::nullopt;
}

// Megatron's CUDA_DEVICE_MAX_CONNECTIONS assertion ("Using tensor model parallelism or context
// parallelism require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1"),
// and NCCL user buffers beside expandable segments (musterd's refusal names its rule
// nccl-ub-expandable-segments).
std::optional<log_signal> env_misconfig(std::string_view line) {
  if (has(line, "CUDA_DEVICE_MAX_CONNECTIONS") &&
      (has(line, "AssertionError") || has(line, "RuntimeError")) && !has(line, "warn") &&
      !has(line, "Warn") && !has(line, "recommend")) {
    auto s = signal_of("env_misconfig");
    s.facts["variable"] = "CUDA_DEVICE_MAX_CONNECTIONS";
    put(s, "wanted", after(line, "CUDA_DEVICE_MAX_CONNECTIONS to ", " ."));
    return s;
  }
  if (has(line, "nccl-ub-expandable-segments") ||
      (has(line, "expandable_segments") &&
       (has(line, "nccl_ub") || has(line, "ncclCommRegister") || has(line, "user buffer")))) {
    auto s = signal_of("env_misconfig");
    s.facts["variable"] = "PYTORCH_CUDA_ALLOC_CONF";
    s.facts["conflict"] = "expandable_segments with NCCL user buffers";
    return s;
  }
  return std::nullopt;
}

// A checkpoint that does not fit the model:
//   "size mismatch for decoder.layers.0.mlp.linear_fc1.weight: copying a param with shape
//    torch.Size([4096, 1024]) from checkpoint, the shape in current model is
//    torch.Size([2048, 1024])."
//   "Error(s) in loading state_dict for GPTModel:", "Missing key(s) in state_dict: ...",
//   torch.distributed.checkpoint's "Size mismatch between saved torch.Size([...]) and current:
//   torch.Size([...]) for ...", the engine's "... the checkpoint is of another model ...".
constexpr std::string_view kShardedForLayout = "optimizer state is sharded for that layout";

log_signal checkpoint_mismatch(std::string_view line) {
  auto s = signal_of("checkpoint_mismatch");
  put(s, "tensor", between(line, "size mismatch for ", {": "}));
  put(s, "checkpoint_shape", between(line, "copying a param with shape ", {" from checkpoint"}));
  put(s, "model_shape", after(line, "the shape in current model is ", ""));
  if (has(line, "Missing key(s)")) s.facts["problem"] = "missing keys";
  if (has(line, "Unexpected key(s)")) s.facts["problem"] = "unexpected keys";
  // muster-train's: "checkpoint D was saved with world_size = 2, this run has 4; its optimizer
  // state is sharded for that layout: ..."
  if (has(line, kShardedForLayout))
    s.facts["layout"] = fmt::format(
        "{} = {}, this run has {}", between(line, " was saved with ", {" = "}),
        between(line, " = ", {", this run has"}), between(line, ", this run has ", {";"}));
  return s;
}

// Ray compiled graphs (verl, OpenRLHF, vLLM on Ray): "ray.exceptions.RayChannelTimeoutError:
// System error: If the execution is expected to take a long time, increase
// RAY_CGRAPH_get_timeout which is currently 10 seconds."
log_signal ray_channel_timeout(std::string_view line) {
  auto s = signal_of("ray_channel_timeout");
  put(s, "timeout_s", between(line, "which is currently ", {" seconds"}));
  return s;
}

}  // namespace

bool engine_collective_line(std::string_view line) {
  // a collective, or a group that did not form ("] connect timed out after")
  return ((has(line, " seq=") && has(line, " bytes=")) || has(line, "] connect ")) &&
         has(line, "; not arrived: ") &&
         (has(line, " failed after ") || has(line, " timed out after "));
}

log_signal muster_hang_signal(std::string_view line, std::optional<int> hung) {
  auto s = signal_of("hang_watchdog_stuck");
  s.facts["source"] = "muster";
  s.rank = hung;
  if (has(line, kStoppedSaid)) s.facts["stopped"] = "true";
  // a rank hung waiting on another names the one it waited on: that one is the hang
  const auto culprits = hang_waited_on(line);
  if (!culprits.empty() &&
      (!hung || std::find(culprits.begin(), culprits.end(), *hung) == culprits.end())) {
    s.rank = culprits.front();
    s.more_ranks.assign(culprits.begin() + 1, culprits.end());
  }
  return s;
}

std::vector<int> hang_waited_on(std::string_view line) {
  std::vector<int> out;
  const auto text = between(line, "; waited on: rank ", {" ("});
  std::string_view list = text;
  while (!list.empty()) {
    const auto n = number_at(list);
    if (!n) break;
    out.push_back(*n);
    const auto comma = list.find(", ");
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 2);
  }
  return out;
}

std::span<const std::string_view> signal_keywords() {
  static constexpr std::string_view kWords[] = {
      "CUDA out of memory",
      "CUDA error: out of memory",
      "Cuda failure",
      "Failed to CUDA",
      "CUDA_ERROR_OUT_OF_MEMORY",
      "Watchdog caught collective operation timeout",
      "Timeout at NCCL work",
      "; not arrived: ",
      "Heartbeat monitor timed out",
      "watchdog got stuck",
      " is hung: ",
      "DUE TO TIME LIMIT",
      "DUE TO NODE FAILURE",
      "Node failure on ",
      ") is gone: its connection",
      "oom_kill event",
      "oom-kill event",
      ": Out Of Memory",
      "of memory: Killed process",
      "NVRM: Xid",
      "fallen off the bus",
      "uncorrectable ECC error",
      "unhandled system error",
      "Fatal Python error: ",
      "MemoryError",
      "DefaultCPUAllocator",
      "std::bad_alloc",
      "Timed out waiting ",
      "Connection closed by peer",
      "Connection reset by peer",
      "shared memory segment",
      "ddress already in use",
      "client socket has timed out",
      "cannot be retrieved",
      "waiting for clients",
      "RendezvousTimeoutError",
      "store based barrier",
      "connect() timed out",
      "the rendezvous store at",
      " nodes reached the rendezvous within ",
      "rendezvous: no rendezvous store of ",
      "RayChannelTimeoutError",
      "failed (exitcode: ",
      "srun: error: ",
      "(SIGKILL) received by PID",
      "CUDA_DEVICE_MAX_CONNECTIONS",
      "expandable_segments",
      "nccl-ub-expandable",
      "size mismatch for",
      "in loading state_dict",
      "key(s) in state_dict",
      "Size mismatch between saved",
      "checkpoint is of another model",
      kShardedForLayout,
  };
  return kWords;
}

std::optional<int> rank_of_line(std::string_view line) {
  for (std::string_view prefix : {"[rank", "[default"}) {
    if (!line.starts_with(prefix)) continue;
    auto rest = line.substr(prefix.size());
    if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (auto n = number_at(rest)) return n;
  }
  if (const auto label = srun_label(line); !label.empty()) return number_at(label);
  return std::nullopt;
}

std::string_view srun_label(std::string_view line) {
  // a number, a colon, a space; padded to the widest: " 3: text"
  while (line.starts_with(' ')) line.remove_prefix(1);
  std::size_t digits = 0;
  while (digits < line.size() && digits < 7 &&
         std::isdigit(static_cast<unsigned char>(line[digits])))
    ++digits;
  return digits > 0 && line.substr(digits).starts_with(": ") ? line.substr(0, digits)
                                                             : std::string_view();
}

std::string_view unlabelled(std::string_view line) {
  const auto label = srun_label(line);
  return label.empty() ? line : line.substr(label.data() - line.data() + label.size() + 2);
}

std::string_view rank_text(std::string_view line) {
  while (line.starts_with(' ')) line.remove_prefix(1);
  line = unlabelled(line);
  for (bool more = true; more;) {
    more = false;
    for (std::string_view prefix : {"[rank", "[default"}) {
      const auto close = line.find(']');
      if (!line.starts_with(prefix) || close == std::string_view::npos) continue;
      auto number = line.substr(prefix.size(), close - prefix.size());
      if (number.starts_with(' ')) number.remove_prefix(1);
      if (number.empty() || number.find_first_not_of("0123456789") != std::string_view::npos)
        continue;  // "[rank 1/4 group world]": the engine's, not a prefix
      line.remove_prefix(close + 1);
      if (line.starts_with(':')) line.remove_prefix(1);
      if (line.starts_with(' ')) line.remove_prefix(1);
      more = true;
    }
  }
  return line;
}

bool traceback_start(std::string_view text) {
  return text.starts_with("Traceback (most recent call last):");
}

bool exception_line(std::string_view text) {
  const auto name = text.substr(0, std::min(text.find(':'), text.size()));
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front())) || name.front() == '.')
    return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  if (!name.ends_with("Error") && !name.ends_with("Exception")) return false;
  return name.size() == text.size() || text.substr(name.size()).starts_with(": ");
}

std::optional<log_signal> match_log_line(std::string_view line) {
  std::optional<log_signal> s;
  const bool nccl = has(line, "NCCL");
  if ((has(line, "Cuda failure") && has(line, "out of memory")) ||
      has(line, "Failed to CUDA calloc") || has(line, "Failed to CUDA malloc") ||
      (nccl && has(line, "CUDA_ERROR_OUT_OF_MEMORY"))) {
    s = nccl_oom(line);
  } else if (has(line, "CUDA out of memory") || has(line, "CUDA error: out of memory") ||
             has(line, "CUDA_ERROR_OUT_OF_MEMORY")) {
    s = cuda_oom(line);
  } else if (has(line, "Watchdog caught collective operation timeout") ||
             has(line, "Timeout at NCCL work") || engine_collective_line(line) ||
             gloo_timeout_line(line)) {
    s = nccl_timeout(line);
  } else if (has(line, "Heartbeat monitor timed out") || has(line, "watchdog got stuck") ||
             (has(line, " is hung: ") && has(line, "muster"))) {
    s = hang(line);
  } else if (has(line, "DUE TO TIME LIMIT") && has(line, "CANCELLED AT")) {
    s = signal_of("slurm_time_limit");
    put(*s, "at", after(line, "CANCELLED AT ", " "));
    put(*s, "job", after(line, "*** JOB ", " "));
    put(*s, "step", after(line, "*** STEP ", " "));
    put(*s, "host", after(line, " ON ", " "));
  } else if (has(line, "DUE TO NODE FAILURE") && has(line, "CANCELLED AT")) {
    // said by a node still up ("ON n1"), of the job a node of which failed
    s = signal_of("node_failure");
    put(*s, "at", after(line, "CANCELLED AT ", " "));
    put(*s, "job", after(line, "*** JOB ", " "));
    put(*s, "step", after(line, "*** STEP ", " "));
    s->facts["slurm"] = "yes";
  } else if (has(line, "srun: error: Node failure on ")) {
    s = signal_of("node_failure");
    if (auto node = after(line, "Node failure on ", " "); !node.empty()) s->hosts.push_back(node);
    s->facts["slurm"] = "yes";
  } else if (has(line, kLauncherGone)) {
    s = signal_of("node_failure");
    if (auto node = after(line, "the launcher on ", " "); !node.empty()) s->hosts.push_back(node);
    put(*s, "node_rank", after(line, " (node ", ")"));
    s->facts["launcher_gone"] = "yes";
  } else if (has(line, "oom_kill event") || has(line, "oom-kill event") ||
             has(line, ": Out Of Memory") || has(line, "of memory: Killed process")) {
    s = signal_of("host_oom_kill");
    put(*s, "step", after(line, "StepId=", " "));
    put(*s, "killed", after(line, "Killed process ", "("));
    if (auto n = number_at(after(line, "task ", ":"))) s->rank = *n;
  } else if (host_memory_line(line)) {
    s = host_memory_error(line);
  } else if ((has(line, "NVRM: Xid") && hardware_xid(line)) || has(line, "fallen off the bus") ||
             has(line, "uncorrectable ECC error")) {
    s = signal_of("gpu_hardware_fault");
    put(*s, "pci", after(line, "(PCI:", ")"));
    put(*s, "xid", after(line, "): ", ","));
  } else if (has(line, "unhandled system error") ||
             (has(line, "NCCL WARN") && has(line, "shared memory segment")) ||
             gloo_peer_gone_line(line)) {
    s = signal_of("nccl_system_error");
    if (gloo_peer_gone_line(line)) s->facts["backend"] = "gloo";
    if (has(line, "/dev/shm") || has(line, "shm_open") || has(line, "shared memory"))
      s->facts["sub_cause"] = "shared memory";
    else if (has(line, "NET/") || has(line, "Connection refused") ||
             has(line, "Connection reset") || has(line, "Connection closed") ||
             has(line, "No route to host") || has(line, "Network is unreachable"))
      s->facts["sub_cause"] = "network";
  } else if (has(line, "ddress already in use") &&
             (has(line, "socket") || has(line, "TCPStore") || has(line, "c10d") ||
              has(line, "rendezvous") || has(line, "errno: 98") || has(line, "MASTER_PORT"))) {
    s = signal_of("rendezvous_port_in_use");
    put(*s, "port", after(line, "port: ", " ,)"));
  } else if (has(line, "client socket has timed out") ||
             (has(line, "waiting for clients") && has(line, "Timed out")) ||
             has(line, "RendezvousTimeoutError") ||
             (has(line, "store based barrier") && has(line, "Timed out")) ||
             has(line, "connect() timed out") || has(line, "the rendezvous store at") ||
             // Gloo's process group waiting for its peers to connect (torch 1.13 - 2.x)
             has(line, "RuntimeError: Socket Timeout") || unresolved_host(line) ||
             launchers_rendezvous_line(line)) {
    s = rendezvous_timeout(line);
  } else if (has(line, "RayChannelTimeoutError")) {
    s = ray_channel_timeout(line);
  } else if (has(line, "Fatal Python error: ")) {  // faulthandler, before a crash's stack
    s = signal_of("worker_failed_see_error_file");
    s->facts["error"] = "Fatal Python error: " + after(line, "Fatal Python error: ", "");
  } else if (auto exit = worker_exit(line)) {
    s = std::move(exit);
  } else if (auto env = env_misconfig(line)) {
    s = std::move(env);
  } else if (has(line, "size mismatch for") || has(line, "in loading state_dict") ||
             has(line, "key(s) in state_dict") || has(line, "Size mismatch between saved") ||
             has(line, "checkpoint is of another model") || has(line, kShardedForLayout)) {
    s = checkpoint_mismatch(line);
  }
  // muster's launcher's own line: its srun -l label is its node's task, never a rank
  if (s && !s->rank && !unlabelled(line).starts_with("muster: ")) s->rank = rank_of_line(line);
  return s;
}

}  // namespace muster::launcher::diagnose
