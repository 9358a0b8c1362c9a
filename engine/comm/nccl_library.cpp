// Loading NCCL: see nccl_library.hpp.
#include "engine/comm/nccl_library.hpp"

#include "common/shared_library.hpp"

namespace muster::engine::comm {

const nccl_library& nccl() {
  static const nccl_library api = [] {
    static const shared_library lib("NCCL", {"libnccl.so.2"});
    nccl_library a;
    a.soname = lib.soname();
    lib.load(a.get_version, "ncclGetVersion");
    lib.load(a.get_unique_id, "ncclGetUniqueId");
    lib.load(a.comm_init_rank, "ncclCommInitRank");
    lib.load(a.comm_destroy, "ncclCommDestroy");
    lib.load(a.comm_abort, "ncclCommAbort");
    lib.load(a.comm_get_async_error, "ncclCommGetAsyncError");
    lib.load(a.get_error_string, "ncclGetErrorString");
    lib.load(a.get_last_error, "ncclGetLastError");
    lib.load(a.all_reduce, "ncclAllReduce");
    lib.load(a.all_gather, "ncclAllGather");
    lib.load(a.reduce_scatter, "ncclReduceScatter");
    lib.load(a.broadcast, "ncclBroadcast");
    lib.load(a.send, "ncclSend");
    lib.load(a.recv, "ncclRecv");
    lib.load(a.group_start, "ncclGroupStart");
    lib.load(a.group_end, "ncclGroupEnd");
    lib.load(a.mem_alloc, "ncclMemAlloc");
    lib.load(a.mem_free, "ncclMemFree");
    lib.load(a.comm_register, "ncclCommRegister");
    lib.load(a.comm_deregister, "ncclCommDeregister");
    return a;
  }();
  return api;
}

std::string nccl_failure(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return {};
  std::string out = std::string(call) + ": " + nccl().get_error_string(result);
  if (const char* last = nccl().get_last_error(comm); last && *last)
    out += std::string(" (") + last + ")";
  return out;
}

}  // namespace muster::engine::comm
