// Micro-batches as tensors: see batch.hpp.
#include "engine/train/batch.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace muster::engine::train {
namespace {

// Token `k` of row `r`, as the data has it: "sequence 3 of <documents> (its token 17)", counted
// from 0 in the files' own order.
std::string where_in_data(data::pack_plan& plan, std::int64_t r, std::int64_t k,
                          const std::string& documents) {
  std::int64_t start = 0;
  for (const auto& piece : plan.pieces(r)) {
    if (k < start + piece.length)
      return fmt::format("sequence {} of {} (its token {})", piece.document, documents,
                         piece.offset + k - start);
    start += piece.length;
  }
  return fmt::format("row {} of {} (padding)", r, documents);
}

}  // namespace

batch make_batch(data::pack_plan& plan, const std::vector<std::int64_t>& rows,
                 std::int64_t vocab_size, const std::string& documents) {
  std::vector<std::int64_t> tokens, positions, segments, labels;
  std::int64_t width = 0;
  for (auto r : rows) {
    auto row = plan.row(r);
    for (std::size_t k = 0; k < row.tokens.size(); ++k)
      if (const auto id = row.tokens[k]; id < 0 || id >= vocab_size)
        MUSTER_THROW(errc::invalid_input,
                     "data: {} holds token id {}, which model.vocab_size = {} has no embedding "
                     "row for; set model.vocab_size to the tokenizer's vocabulary (Megatron's "
                     "--vocab-size, the Hugging Face config's vocab_size)",
                     where_in_data(plan, r, static_cast<std::int64_t>(k), documents), id,
                     vocab_size);
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
