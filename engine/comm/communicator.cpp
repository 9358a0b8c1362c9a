// What every backend shares: the collectives into new tensors over the *_into ones, and the
// counts exchange. See communicator.hpp.
#include "engine/comm/communicator.hpp"

#include "common/error.hpp"

namespace muster::engine::comm {

void communicator::check_into(const char* op, const torch::Tensor& out, std::int64_t numel) const {
  MUSTER_CHECK(out.defined() && out.is_contiguous() && out.numel() == numel, errc::internal,
               "[group {}] {} into a tensor of {} elements{}; it needs {} contiguous", name(), op,
               out.defined() ? out.numel() : 0,
               out.defined() && !out.is_contiguous() ? " (not contiguous)" : "", numel);
}

void communicator::all_gather_into(const torch::Tensor& shard, torch::Tensor& out) {
  all_gather_into_async(shard, out)->wait();
}

void communicator::reduce_scatter_sum_into(const torch::Tensor& full, torch::Tensor& out) {
  reduce_scatter_sum_into_async(full, out)->wait();
}

torch::Tensor communicator::all_gather(const torch::Tensor& shard) {
  auto out = torch::empty({shard.numel() * size()}, shard.options());
  all_gather_into(shard, out);
  return out;
}

torch::Tensor communicator::reduce_scatter_sum(const torch::Tensor& full) {
  auto out = torch::empty({full.numel() / std::max(1, size())}, full.options());
  reduce_scatter_sum_into(full, out);
  return out;
}

std::vector<std::int64_t> exchange_counts(communicator& comm,
                                          const std::vector<std::int64_t>& send_counts) {
  auto out = comm.all_to_all(torch::tensor(send_counts, torch::kInt64),
                             std::vector<std::int64_t>(std::size_t(comm.size()), 1),
                             std::vector<std::int64_t>(std::size_t(comm.size()), 1));
  return {out.data_ptr<std::int64_t>(), out.data_ptr<std::int64_t>() + out.numel()};
}

}  // namespace muster::engine::comm
