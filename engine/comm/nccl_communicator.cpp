// Collectives over NCCL: see nccl_communicator.hpp.
#include "engine/comm/nccl_communicator.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "common/error.hpp"
#include "engine/comm/laggards.hpp"
#include "engine/comm/nccl_library.hpp"
#include "engine/comm/nccl_ub_policy.hpp"
#include "engine/comm/pending_call.hpp"
#include "engine/comm/rendezvous.hpp"
#include "engine/comm/wait_clock.hpp"
#include "engine/ops/kernel_tensors.hpp"

namespace muster::engine::comm {
namespace {

// The error a collective that ran out its timeout gets.
constexpr const char* kTimedOut = "timed out";

void cuda_check(cudaError_t e, const char* call) {
  MUSTER_CHECK(e == cudaSuccess, errc::comm, "{}: {}", call, cudaGetErrorString(e));
}

ncclDataType_t nccl_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32:
      return ncclFloat32;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kFloat16:
      return ncclFloat16;
    case torch::kFloat64:
      return ncclFloat64;
    case torch::kInt64:
      return ncclInt64;
    case torch::kInt32:
      return ncclInt32;
    case torch::kUInt8:
      return ncclUint8;
    default:
      MUSTER_THROW(errc::internal, "NCCL carries no {}", c10::toString(t.scalar_type()));
  }
}

// The communicator, shared with the user buffers it registered (they deregister on free).
struct nccl_comm_state {
  ncclComm_t comm = nullptr;
  bool aborted = false;
};

class nccl_group final : public communicator {
 public:
  nccl_group(rendezvous rv, std::string name, std::vector<int> members, const nccl_options& opts)
      : rv_(std::move(rv)), name_(std::move(name)), members_(std::move(members)), options_(opts) {
    rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), rv_.world_rank) -
                             members_.begin());
    MUSTER_CHECK(rank_ < size(), errc::internal, "rank {} is not a member of group {}",
                 rv_.world_rank, name_);
    timeout_ = rv_.times.timeout;
    if (options_.user_buffers) check_nccl_ub_policy();
    rv_.board->publish(seq_key(name_, rank_), kJoinedGroup);  // laggards: joined, no collective
    cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
    const auto key = fmt::format("muster/{}/nccl_id", name_);
    ncclUniqueId id;
    if (rank_ == 0) {
      fail_on(nccl().get_unique_id(&id), "ncclGetUniqueId");
      const auto* p = reinterpret_cast<const std::uint8_t*>(&id);
      rv_.store->set(key, std::vector<std::uint8_t>(p, p + sizeof(id)));
    } else {
      const auto bytes = rv_.store->get(key);  // waits, at most the store's connect timeout
      MUSTER_CHECK(bytes.size() == sizeof(id), errc::comm,
                   "group {}: the NCCL id in the store has {} bytes, not {}", name_, bytes.size(),
                   sizeof(id));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    state_ = std::make_shared<nccl_comm_state>();
    fail_on(nccl().comm_init_rank(&state_->comm, size(), id, rank_), "ncclCommInitRank");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
  }

  ~nccl_group() override {
    if (!state_->aborted && state_->comm != nullptr) nccl().comm_destroy(state_->comm);
    state_->comm = nullptr;
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::string& name() const override { return name_; }
  std::int64_t sequence() const override { return sequence_; }

  // NCCL groups of the same options beside this one; their names get "nccl-" (the Gloo
  // groups' store keys stay apart).
  std::shared_ptr<communicator> subgroup(const std::string& name,
                                         const std::vector<int>& ranks) override {
    return std::make_shared<nccl_group>(rv_, "nccl-" + name, ranks, options_);
  }

  void all_reduce_sum(torch::Tensor& t) override { all_reduce_sum_async(t)->wait(); }

  std::unique_ptr<pending_collective> all_reduce_sum_async(torch::Tensor& t) override {
    auto d = on_device(t);
    auto s = start("all_reduce", d, [&](ncclDataType_t type) {
      return nccl().all_reduce(d.data_ptr(), d.data_ptr(), d.numel(), type, ncclSum, state_->comm,
                               stream_);
    });
    auto shared = std::make_shared<started>(s);
    return std::make_unique<pending_call>(
        [this, shared] { finish(*shared); },
        [t, d]() mutable {
          if (!t.is_same(d)) t.copy_(d);
        },
        // unwaited: the event is released once the collective is done (CUDA defers it)
        [shared] {
          if (shared->done != nullptr) cudaEventDestroy(shared->done);
        });
  }

  std::unique_ptr<pending_collective> all_gather_into_async(const torch::Tensor& shard,
                                                            torch::Tensor& out) override {
    auto d = on_device(shard);
    check_into("all_gather", out, d.numel() * size());
    auto target = written_in_place(out, d) ? out : torch::empty({out.numel()}, d.options());
    auto s = start("all_gather", d, [&](ncclDataType_t type) {
      return nccl().all_gather(d.data_ptr(), target.data_ptr(), d.numel(), type, state_->comm,
                               stream_);
    });
    return pending_into(s, out, target, d);
  }

  std::unique_ptr<pending_collective> reduce_scatter_sum_into_async(const torch::Tensor& full,
                                                                    torch::Tensor& out) override {
    MUSTER_CHECK(full.numel() % size() == 0, errc::internal,
                 "reduce_scatter of {} elements over {} ranks", full.numel(), size());
    auto d = on_device(full);
    check_into("reduce_scatter", out, d.numel() / size());
    auto target = written_in_place(out, d) ? out : torch::empty({out.numel()}, d.options());
    auto s = start("reduce_scatter", d, [&](ncclDataType_t type) {
      return nccl().reduce_scatter(d.data_ptr(), target.data_ptr(), target.numel(), type, ncclSum,
                                   state_->comm, stream_);
    });
    return pending_into(s, out, target, d);
  }

  torch::Tensor all_to_all(const torch::Tensor& input, const std::vector<std::int64_t>& send_rows,
                           const std::vector<std::int64_t>& recv_rows) override {
    MUSTER_CHECK(
        static_cast<int>(send_rows.size()) == size() &&
            static_cast<int>(recv_rows.size()) == size() && input.dim() >= 1 &&
            std::accumulate(send_rows.begin(), send_rows.end(), std::int64_t(0)) == input.size(0),
        errc::internal, "all_to_all: {} rows, send counts of {} ranks, group of {}",
        input.dim() >= 1 ? input.size(0) : -1, send_rows.size(), size());
    auto d = on_device(input);
    std::int64_t row = 1;  // elements a row (also when this rank sends none)
    for (std::int64_t i = 1; i < d.dim(); ++i) row *= d.size(i);
    const auto total = std::accumulate(recv_rows.begin(), recv_rows.end(), std::int64_t(0));
    auto shape = d.sizes().vec();
    shape[0] = total;
    auto out = torch::empty(shape, d.options());
    const auto bytes_per_row = row * d.element_size();
    run("all_to_all", d, [&](ncclDataType_t type) {
      auto failure = nccl().group_start();
      std::int64_t sent = 0, got = 0;
      for (int r = 0; r < size() && failure == ncclSuccess; ++r) {
        const auto n = send_rows[std::size_t(r)], m = recv_rows[std::size_t(r)];
        if (n > 0)
          failure = nccl().send(static_cast<char*>(d.data_ptr()) + sent * bytes_per_row, n * row,
                                type, r, state_->comm, stream_);
        if (m > 0 && failure == ncclSuccess)
          failure = nccl().recv(static_cast<char*>(out.data_ptr()) + got * bytes_per_row, m * row,
                                type, r, state_->comm, stream_);
        sent += n;
        got += m;
      }
      const auto ended = nccl().group_end();
      return failure != ncclSuccess ? failure : ended;
    });
    return out.to(input.device());
  }

  void broadcast(torch::Tensor& t, int root) override {
    auto d = on_device(t);
    run("broadcast", d, [&](ncclDataType_t type) {
      return nccl().broadcast(d.data_ptr(), d.data_ptr(), d.numel(), type, root, state_->comm,
                              stream_);
    });
    if (!t.is_same(d)) t.copy_(d);
  }

  void barrier() override {
    auto one = torch::ones({1}, torch::TensorOptions().device(torch::kCUDA, device_));
    all_reduce_sum(one);
  }

  bool registers_buffers() const override { return options_.user_buffers; }

  // NCCL user buffers when asked for (comm.nccl_ub), else the caching allocator's.
  torch::Tensor collective_buffer(std::int64_t numel,
                                  const torch::TensorOptions& options) override {
    refuse_when_broken("collective_buffer");
    const auto on = options.device(torch::kCUDA, device_);
    if (!options_.user_buffers) return torch::empty({numel}, on);
    const auto bytes =
        static_cast<std::size_t>(numel) * c10::elementSize(c10::typeMetaToScalarType(on.dtype()));
    void* p = nullptr;
    fail_on(nccl().mem_alloc(&p, std::max<std::size_t>(bytes, 1)), "ncclMemAlloc");
    void* handle = nullptr;
    if (const auto e = nccl().comm_register(state_->comm, p, bytes, &handle); e != ncclSuccess) {
      nccl().mem_free(p);
      fail_on(e, "ncclCommRegister");
    }
    std::weak_ptr<nccl_comm_state> state = state_;
    return torch::from_blob(
        p, {numel},
        [state, handle](void* q) {
          if (auto s = state.lock(); s && s->comm != nullptr && !s->aborted)
            nccl().comm_deregister(s->comm, handle);
          nccl().mem_free(q);
        },
        on);
  }

 private:
  struct started {
    const char* op;
    std::int64_t seq, bytes;
    cudaEvent_t done = nullptr;
    std::string error;
  };

  void fail_on(ncclResult_t r, const char* call) {
    const auto failure = nccl_failure(r, call, state_ ? state_->comm : nullptr);
    MUSTER_CHECK(failure.empty(), errc::comm, "[rank {}/{} group {}] {}", rank_, size(), name_,
                 failure);
  }

  // Whether NCCL can write `out` itself: contiguous (checked), on this group's device, of the
  // input's dtype.
  bool written_in_place(const torch::Tensor& out, const torch::Tensor& input) const {
    return out.is_cuda() && out.device().index() == device_ &&
           out.scalar_type() == input.scalar_type();
  }

  // The tensor on this group's device, contiguous (a copy when it is not already).
  torch::Tensor on_device(const torch::Tensor& t) const {
    return t.to(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_))).contiguous();
  }

  // Numbers the collective, orders it after the caller's stream, issues it on the
  // communication stream and records when it is done there.
  template <class Issue>
  started start(const char* op, const torch::Tensor& data, Issue issue) {
    refuse_when_broken(op);
    const auto type = nccl_type(data);  // before numbering: a type NCCL lacks is a bug here
    started s{op, sequence_++, data.numel() * data.element_size(), nullptr, {}};
    rv_.board->publish(seq_key(name_, rank_), s.seq);
    auto* caller = static_cast<cudaStream_t>(ops::kernel_stream(data));
    auto cuda_failure = [](cudaError_t e, const char* what) {
      return e == cudaSuccess ? std::string() : fmt::format("{}: {}", what, cudaGetErrorString(e));
    };
    s.error = cuda_failure(cudaEventRecord(ready_, caller), "cudaEventRecord");
    if (s.error.empty())
      s.error = cuda_failure(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    if (s.error.empty()) {
      try {
        s.error = nccl_failure(issue(type), op, state_->comm);
      } catch (const std::exception& e) {
        s.error = e.what();
      }
    }
    if (s.error.empty())
      s.error = cuda_failure(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming),
                             "cudaEventCreate");
    if (s.error.empty())
      s.error = cuda_failure(cudaEventRecord(s.done, stream_), "cudaEventRecord");
    return s;
  }

  // After an abort the communicator is gone: nothing may touch it (collectives still pending
  // included: their events may say done over garbage).
  void refuse_when_broken(const char* op) const {
    MUSTER_CHECK(!broken_, errc::comm,
                 "[rank {}/{} group {}] {} after an earlier failure aborted the group", rank_,
                 size(), name_, op);
  }

  // The handle of a collective that wrote `target`: waiting copies it into `out` where it is
  // not `out` itself; `input` stays alive until the collective is done.
  std::unique_ptr<pending_collective> pending_into(const started& s, torch::Tensor out,
                                                   torch::Tensor target, torch::Tensor input) {
    auto shared = std::make_shared<started>(s);
    return std::make_unique<pending_call>(
        [this, shared] { finish(*shared); },
        [out, target, input]() mutable {
          if (!target.is_same(out)) out.view({-1}).copy_(target);
        },
        // unwaited: the event is released once the collective is done (CUDA defers it)
        [shared] {
          if (shared->done != nullptr) cudaEventDestroy(shared->done);
        });
  }

  // Waits on the host for the collective, at most the timeout, watching NCCL's async error.
  void finish(started& s) {
    if (broken_) {
      if (s.done != nullptr) cudaEventDestroy(s.done);
      s.done = nullptr;
      refuse_when_broken(s.op);
    }
    const auto began = std::chrono::steady_clock::now();
    const auto deadline = began + timeout_;
    std::string error = s.error;
    while (error.empty()) {
      const auto q = cudaEventQuery(s.done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        error = std::string("CUDA: ") + cudaGetErrorString(q);
        break;
      }
      ncclResult_t async = ncclSuccess;
      nccl().comm_get_async_error(state_->comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        error = nccl_failure(async, "NCCL", state_->comm);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        error = kTimedOut;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    const auto took = std::chrono::steady_clock::now() - began;
    add_wait_seconds(std::chrono::duration<double>(took).count());
    if (s.done != nullptr) cudaEventDestroy(s.done);
    s.done = nullptr;
    if (error.empty()) return;
    broken_ = true;
    nccl().comm_abort(state_->comm);  // frees the stream of the stuck kernel
    state_->aborted = true;
    throw_collective_failure(
        {rank_, size(), name_, s.op, s.seq, s.bytes, timeout_, error,
         std::chrono::duration_cast<std::chrono::milliseconds>(took), error == kTimedOut},
        *rv_.board, members_);
  }

  template <class Issue>
  void run(const char* op, const torch::Tensor& data, Issue issue) {
    auto s = start(op, data, issue);
    finish(s);
  }

  rendezvous rv_;
  std::string name_;
  std::vector<int> members_;
  nccl_options options_;
  int rank_ = 0;
  int device_ = 0;
  std::chrono::milliseconds timeout_{0};
  std::shared_ptr<nccl_comm_state> state_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::int64_t sequence_ = 0;
  bool broken_ = false;
};

}  // namespace

std::shared_ptr<communicator> make_nccl_group(communicator& world, const std::string& name,
                                              const std::vector<int>& ranks,
                                              const nccl_options& options) {
  return std::make_shared<nccl_group>(rendezvous_of(world), name, ranks, options);
}

std::string nccl_version() {
  int v = 0;
  nccl().get_version(&v);
  return fmt::format("{}.{}.{} ({})", v / 10000, (v / 100) % 100, v % 100, nccl().soname);
}

}  // namespace muster::engine::comm
