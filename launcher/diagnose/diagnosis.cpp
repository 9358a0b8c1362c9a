// From signals to a diagnosis: see diagnosis.hpp.
#include "launcher/diagnose/diagnosis.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace muster::launcher::diagnose {
namespace {

constexpr std::size_t kMaxSuspicious = 10;
constexpr std::size_t kMaxEvidenceText = 400;

constexpr std::string_view kSuspiciousWords[] = {
    "Error", "ERROR", "error:", "Traceback", "FATAL", "failed"};

bool suspicious_line(std::string_view line) {
  for (std::string_view word : kSuspiciousWords)
    if (line.find(word) != std::string_view::npos) return true;
  return false;
}

std::string fact(const finding& f, const char* key) {
  const auto it = f.facts.find(key);
  return it == f.facts.end() ? "" : it->second;
}

// The summary and the fixes of a finding, from its category and facts.
void explain(finding& f, int world_size) {
  const auto ranks = f.ranks.empty() ? std::string("rank unknown")
                                     : fmt::format("rank {}", fmt::join(f.ranks, ", "));
  if (f.category == "cuda_oom") {
    f.summary =
        fmt::format("CUDA out of memory on {} (GPU {}): tried to allocate {} of {}{}", ranks,
                    fact(f, "gpu").empty() ? "?" : fact(f, "gpu"), fact(f, "tried_to_allocate"),
                    fact(f, "capacity"),
                    fact(f, "free").empty() ? "" : fmt::format(", {} free", fact(f, "free")));
    if (!fact(f, "other_processes").empty())
      f.fixes.push_back(fmt::format(
          "other processes hold memory on that GPU ({}): find and stop them (nvidia-smi, "
          "muster node preflight) before shrinking the model",
          fact(f, "other_processes")));
    f.fixes.insert(
        f.fixes.end(),
        {"with packing, lower train.max_tokens_per_pack; without it, lower "
         "train.micro_batch_size (Megatron --micro-batch-size)",
         "at micro batch 1, raise parallel.context (Megatron --context-parallel-size), a power "
         "of two not above the GPUs per node",
         "train.recompute = \"full\" (Megatron --recompute-granularity full "
         "--recompute-method uniform)",
         "a stronger sharding: parallel.sharding = \"optim_grads_params\" (Megatron-FSDP "
         "--data-parallel-sharding-strategy optim_grads_params)"});
    if (!fact(f, "reserved_unallocated").empty())
      f.fixes.push_back(
          fmt::format("{} is reserved but unallocated (fragmentation): "
                      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, unless comm.nccl_ub is on",
                      fact(f, "reserved_unallocated")));
  } else if (f.category == "nccl_timeout" || f.category == "nccl_timeout_cascade") {
    std::string missing;
    if (world_size > 0 && !f.ranks.empty()) {
      std::vector<int> silent;
      for (int r = 0; r < world_size; ++r)
        if (!f.ranks.contains(r)) silent.push_back(r);
      if (!silent.empty())
        missing = fmt::format("; rank {} did not report", fmt::join(silent, ", "));
    }
    f.summary = fmt::format("{}collective {} seq {} timed out after {} ms on {}{}",
                            f.category == "nccl_timeout_cascade" ? "knock-on: " : "", fact(f, "op"),
                            fact(f, "seq"), fact(f, "timeout_ms"), ranks, missing);
    if (f.category == "nccl_timeout_cascade")
      f.fixes.push_back("fix the root cause above: these ranks waited on a rank that had failed");
    else
      f.fixes.insert(
          f.fixes.end(),
          {"look at the ranks that did not report the timeout: the usual culprits (hung in "
           "data loading, a different code path, a dead GPU)",
           "raise comm.timeout only when a step is legitimately that long (torch "
           "init_process_group(timeout=...), Megatron --distributed-timeout-minutes)"});
  } else if (f.category == "slurm_time_limit") {
    f.summary =
        fmt::format("Slurm cancelled {} at its time limit ({})",
                    fact(f, "job").empty() ? "step " + fact(f, "step") : "job " + fact(f, "job"),
                    fact(f, "at"));
    f.fixes = {"ask for more time (sbatch --time)",
               "checkpoint before the limit: sbatch --signal=B:USR1@300 and "
               "launch.requeue_on_signal = true to come back where it stopped"};
  } else if (f.category == "host_oom_kill") {
    f.summary = fmt::format("the kernel's OOM killer ended {} (host memory, not GPU memory)",
                            f.ranks.empty() ? "a task" : ranks);
    f.fixes = {"ask Slurm for more host memory (sbatch --mem or --mem-per-gpu)",
               "fewer data loader workers and smaller prefetch; pinned-memory buffers count too"};
  } else if (f.category == "gpu_hardware_fault") {
    f.summary = fmt::format("a GPU fault in the kernel log{}{}",
                            fact(f, "xid").empty() ? "" : ": Xid " + fact(f, "xid"),
                            fact(f, "pci").empty() ? "" : " on PCI " + fact(f, "pci"));
    f.fixes = {
        "drain the node (scontrol update nodename=<node> state=drain reason=xid) and "
        "resubmit without it (sbatch --exclude=<node>)",
        "muster node preflight on the node shows what the driver reports now"};
  } else if (f.category == "nccl_system_error") {
    const auto cause = fact(f, "sub_cause");
    f.summary = fmt::format("NCCL unhandled system error on {}{}", ranks,
                            cause.empty() ? "" : " (" + cause + ")");
    f.fixes = cause == "shared memory"
                  ? std::vector<std::string>{"make /dev/shm larger: a container needs "
                                             "--shm-size or --ipc=host"}
                  : std::vector<std::string>{
                        "run with NCCL_DEBUG=INFO for the sub-cause; check NCCL_SOCKET_IFNAME "
                        "names an interface every node has (muster node env)"};
  } else if (f.category == "rendezvous_port_in_use") {
    f.summary = fmt::format("the rendezvous port {}is already in use",
                            fact(f, "port").empty() ? "" : fact(f, "port") + " ");
    f.fixes = {
        "leave launch.master_port = 0 (muster picks a free port), or torchrun "
        "--master-port / MASTER_PORT another port; two jobs on one node must not share it"};
  }
}

}  // namespace

void diagnoser::add_line(const std::string& file, std::int64_t number, std::string_view line,
                         std::optional<int> file_rank) {
  auto signal = match_log_line(line);
  if (!signal) {
    if (findings_.empty() && suspicious_line(line)) {
      if (suspicious_.size() == kMaxSuspicious) suspicious_.erase(suspicious_.begin());
      suspicious_.push_back({file, number, std::string(line.substr(0, kMaxEvidenceText))});
    }
    return;
  }
  const auto& category = signal->category;
  auto it = std::find_if(findings_.begin(), findings_.end(),
                         [&](const finding& f) { return f.category == category; });
  if (it == findings_.end()) {
    findings_.push_back({category, false, {}, {}, 0, signal->facts, "", {}});
    it = findings_.end() - 1;
  }
  ++it->count;
  if (const auto rank = signal->rank ? signal->rank : file_rank) it->ranks.insert(*rank);
  if (it->evidence.size() < kMaxEvidence)
    it->evidence.push_back({file, number, std::string(line.substr(0, kMaxEvidenceText))});
}

std::span<const std::string_view> diagnoser::keywords() {
  static const std::vector<std::string_view> words = [] {
    std::vector<std::string_view> out(signal_keywords().begin(), signal_keywords().end());
    out.insert(out.end(), std::begin(kSuspiciousWords), std::end(kSuspiciousWords));
    return out;
  }();
  return words;
}

diagnosis diagnoser::finish() const {
  diagnosis d;
  d.lines_read = lines_;
  d.findings = findings_;
  // the root: the first failure that is not a timeout, else the first timeout. Beside another
  // failure the timeouts are its knock-on effect, wherever their lines stand: the ranks that
  // waited on the failed one time out, and their logs may be read first.
  auto root = std::find_if(d.findings.begin(), d.findings.end(),
                           [](const finding& f) { return f.category != "nccl_timeout"; });
  if (root != d.findings.end()) {
    for (auto& f : d.findings)
      if (f.category == "nccl_timeout") f.category = "nccl_timeout_cascade";
  } else {
    root = d.findings.begin();
  }
  if (root != d.findings.end()) {
    root->root = true;
    std::rotate(d.findings.begin(), root, root + 1);
  }
  for (auto& f : d.findings) explain(f, world_size_);
  if (d.findings.empty()) d.suspicious = suspicious_;
  return d;
}

}  // namespace muster::launcher::diagnose
