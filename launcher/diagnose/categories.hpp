// The category ids of `muster diagnose`, all of them, each with what it means in one line. The
// ids are stable (scripts read them from --json); docs/diagnose.md has a section and an example
// for each, and tests/launcher/test_diagnose_reference.cpp checks the page against this list.
// A new category is added here first: diagnoser::finish refuses a finding whose id is not here.
// Not here: which lines make a category (log_signal.cpp), what a finding says (explain.cpp).
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace muster::launcher::diagnose {

enum class category_role {
  cause,     // a finding that may be the root (or a knock-on effect beside another root)
  knock_on,  // a finding that is never the root
  nothing,   // no finding: what --json says when nothing failed
};

struct category_info {
  std::string_view id;
  category_role role;
  std::string_view meaning;  // one line
};

inline constexpr category_info kCategories[] = {
    {"cuda_oom", category_role::cause, "a PyTorch or CUDA allocation ran out of GPU memory"},
    {"nccl_oom", category_role::cause, "NCCL could not allocate GPU memory for its own buffers"},
    {"nccl_timeout", category_role::cause,
     "the first collective that did not finish: it timed out, or (muster's engine says which) "
     "failed before its timeout"},
    {"nccl_timeout_cascade", category_role::knock_on,
     "the other collective timeouts and failures: ranks that waited on the one that failed"},
    {"hang_watchdog_stuck", category_role::cause,
     "a rank stopped making progress: muster's hang detection, or a stuck NCCL watchdog"},
    {"host_oom_kill", category_role::cause,
     "the kernel's OOM killer ended a task: host memory, not GPU memory"},
    {"host_memory_error", category_role::cause,
     "a worker could not allocate host memory itself (Python's MemoryError, PyTorch's CPU "
     "allocator, std::bad_alloc): host memory, not GPU memory"},
    {"worker_killed_sigkill", category_role::cause, "a worker was killed by SIGKILL (signal 9)"},
    {"worker_failed_see_error_file", category_role::cause,
     "a worker exited with an error; its error file or log says which"},
    {"slurm_time_limit", category_role::cause, "Slurm cancelled the job or step at its time limit"},
    {"node_failure", category_role::cause,
     "a node of the job went down, or its launcher vanished with its ranks (Slurm's node "
     "failure, muster's launcher gone)"},
    {"gpu_hardware_fault", category_role::cause,
     "the driver reported a fault of the GPU or its links (an Xid of the hardware, ECC)"},
    {"env_misconfig", category_role::cause,
     "an environment the job cannot run with (CUDA_DEVICE_MAX_CONNECTIONS, NCCL user buffers "
     "beside expandable segments)"},
    {"rendezvous_timeout", category_role::cause,
     "the ranks did not all reach the rendezvous store in time"},
    {"rendezvous_port_in_use", category_role::cause,
     "the rendezvous port was already taken on the master node"},
    {"ray_channel_timeout", category_role::cause, "a Ray compiled-graph channel timed out"},
    {"checkpoint_mismatch", category_role::cause,
     "the checkpoint does not fit the model (shapes, missing or unexpected keys)"},
    {"nccl_system_error", category_role::cause,
     "NCCL's unhandled system error, or Gloo's closed connection: shared memory, the network, "
     "a peer gone"},
    {"unknown", category_role::nothing,
     "nothing was diagnosed: the last lines with error words, to read by hand"},
};

// Every category, in the order docs/diagnose.md lists them.
inline std::span<const category_info> categories() {
  return kCategories;
}

// The category `id`, or nullptr when it is not one.
inline const category_info* find_category(std::string_view id) {
  for (const auto& c : kCategories)
    if (c.id == id) return &c;
  return nullptr;
}

// Throws std::logic_error (a defect of muster, not of the input) when `id` is not a category
// a finding may have: listed above, and not `unknown`.
inline void check_finding_category(std::string_view id) {
  const auto* c = find_category(id);
  if (!c || c->role == category_role::nothing)
    throw std::logic_error("diagnose: a finding of category '" + std::string(id) +
                           "', which launcher/diagnose/categories.hpp does not list; add it "
                           "there with its meaning, and its section to docs/diagnose.md");
}

}  // namespace muster::launcher::diagnose
