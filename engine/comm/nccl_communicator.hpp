// The NCCL backend: a group of ranks over NCCL on this process's current CUDA device, made
// beside the Gloo world (its rendezvous store carries the NCCL unique id, its seq_board the
// sequence numbers for the error line). Built with CUDA only (MUSTER_WITH_CUDA).
//
// Every collective runs on the group's own communication stream, ordered after the work
// enqueued on the caller's current stream (an event), and the call returns once the
// collective is done on this rank, at most the group's timeout: then the communicator is
// aborted (ncclCommAbort) and the call throws the same line as the Gloo backend's. CPU tensors
// are staged through the device (exchange_counts' int64 counts).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.hpp"

namespace muster::engine::comm {

struct nccl_options {
  // comm.nccl_ub: collective_buffer() hands out NCCL user buffers (ncclMemAlloc +
  // ncclCommRegister). Refused, with the policy's message, under expandable segments.
  bool user_buffers = false;
};

// Every member calls it with the same arguments. `world` is the group make_world() made;
// `name` must be unique in the job and differ from the Gloo groups' names.
std::shared_ptr<communicator> make_nccl_group(communicator& world, const std::string& name,
                                              const std::vector<int>& ranks,
                                              const nccl_options& options = {});

// The NCCL library's version ("2.28.3") and soname; throws when it cannot be loaded.
std::string nccl_version();

}  // namespace muster::engine::comm
