// NCCL, opened at the first use (libnccl.so.2: the one PyTorch has loaded is reused), with the
// functions the NCCL backend calls, typed as nccl.h declares them. Built with CUDA only.
#pragma once

#include <nccl.h>

#include <string>

namespace muster::engine::comm {

struct nccl_library {
  std::string soname;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclMemAlloc) mem_alloc = nullptr;
  decltype(&ncclMemFree) mem_free = nullptr;
  decltype(&ncclCommRegister) comm_register = nullptr;
  decltype(&ncclCommDeregister) comm_deregister = nullptr;
};

// Throws std::runtime_error when NCCL (2.19 or later: user buffers) cannot be loaded.
const nccl_library& nccl();

// "ncclAllReduce: unhandled system error (...last error...)" unless `result` is ncclSuccess
// (ncclInProgress counts as success: the call was enqueued).
std::string nccl_failure(ncclResult_t result, const char* call, ncclComm_t comm);

}  // namespace muster::engine::comm
