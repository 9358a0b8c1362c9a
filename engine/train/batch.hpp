// One micro-batch as tensors: rows of the pack plan stacked, for the model's forward.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "engine/data/pack_plan.hpp"

namespace muster::engine::train {

struct batch {
  torch::Tensor tokens, positions, segments, labels;  // (rows, row_tokens) int64
  std::int64_t num_tokens = 0;                        // rows * row_tokens (padding included)
  std::int64_t num_label_tokens = 0;                  // tokens that carry a loss

  // The same batch with its tensors on `device`.
  batch to(torch::Device device) const {
    return {tokens.to(device), positions.to(device), segments.to(device),
            labels.to(device), num_tokens,           num_label_tokens};
  }
};

// The rows `rows` (global row numbers) of `plan`, stacked. Throws errc::invalid_input naming
// the row, the token id and `documents` (for the message) when a token id is not below
// `vocab_size` (the model's embedding has no row for it).
batch make_batch(data::pack_plan& plan, const std::vector<std::int64_t>& rows,
                 std::int64_t vocab_size, const std::string& documents);

}  // namespace muster::engine::train
