// Micro-batches as tensors: see batch.hpp.
#include "engine/train/batch.hpp"

#include "common/error.hpp"

namespace muster::engine::train {

batch make_batch(data::pack_plan& plan, const std::vector<std::int64_t>& rows,
                 std::int64_t vocab_size, const std::string& documents) {
  std::vector<std::int64_t> tokens, positions, segments, labels;
  std::int64_t width = 0;
  for (auto r : rows) {
    auto row = plan.row(r);
    for (const auto id : row.tokens)
      MUSTER_CHECK(id >= 0 && id < vocab_size, errc::invalid_input,
                   "data: row {} of {} holds token id {}, which model.vocab_size = {} has no "
                   "embedding row for; set model.vocab_size to the tokenizer's vocabulary "
                   "(Megatron's --vocab-size, the Hugging Face config's vocab_size)",
                   r, documents, id, vocab_size);
    width = static_cast<std::int64_t>(row.tokens.size());
    tokens.insert(tokens.end(), row.tokens.begin(), row.tokens.end());
    positions.insert(positions.end(), row.positions.begin(), row.positions.end());
    segments.insert(segments.end(), row.segments.begin(), row.segments.end());
    labels.insert(labels.end(), row.labels.begin(), row.labels.end());
  }
  const auto n = static_cast<std::int64_t>(rows.size());
  auto as_tensor = [&](const std::vector<std::int64_t>& v) {
    return torch::tensor(v, torch::kInt64).view({n, width});
  };
  batch b{as_tensor(tokens), as_tensor(positions), as_tensor(segments), as_tensor(labels)};
  b.num_tokens = n * width;
  b.num_label_tokens = std::count_if(labels.begin(), labels.end(), [](auto l) { return l >= 0; });
  return b;
}

}  // namespace muster::engine::train
