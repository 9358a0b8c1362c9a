// A differentiable all-to-all of rows: see expert_dispatch.hpp.
#include "engine/parallel/expert_dispatch.hpp"

namespace muster::engine::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct rows_all_to_all : torch::autograd::Function<rows_all_to_all> {
  static torch::Tensor forward(AutogradContext* ctx, std::int64_t group, const torch::Tensor& rows,
                               std::vector<std::int64_t> send, std::vector<std::int64_t> recv) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return reinterpret_cast<comm::communicator*>(group)->all_to_all(rows.contiguous(), send, recv);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* group = reinterpret_cast<comm::communicator*>(ctx->saved_data["group"].toInt());
    // The gradients of the rows received go back to their senders.
    auto back = group->all_to_all(grads[0].contiguous(), ctx->saved_data["recv"].toIntVector(),
                                  ctx->saved_data["send"].toIntVector());
    return {torch::Tensor(), back, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_to_all_rows(comm::communicator* group, const torch::Tensor& rows,
                              const std::vector<std::int64_t>& send,
                              const std::vector<std::int64_t>& recv) {
  return rows_all_to_all::apply(reinterpret_cast<std::int64_t>(group), rows, send, recv);
}

model::expert_group expert_group_over(std::shared_ptr<comm::communicator> group) {
  return {[group](const torch::Tensor& rows, const std::vector<std::int64_t>& send,
                  const std::vector<std::int64_t>& recv) {
    return all_to_all_rows(group.get(), rows, send, recv);
  }};
}

}  // namespace muster::engine::parallel
