// Which tokens make up each training row, and which rows each rank reads at each step.
//
// Each epoch the documents are shuffled (a permutation from the seed and the epoch alone, the
// same on every rank) and then laid into rows of `row_tokens` tokens:
//   - packed: documents back to back, a document that does not fit continuing in the next
//     row; the last row of an epoch is padded;
//   - not packed: each row holds one piece of one document, padded at its end.
// Every piece is its own attention segment with positions from 0, and predicts only its own
// next tokens: the label of a piece's last token, and of padding, is -100.
// Rows are numbered across epochs (row r is row r % rows_per_epoch of epoch r / rows_per_epoch)
// and dealt to ranks by global_row(), so a run resumed at step s reads exactly the rows an
// uninterrupted run would, and each rank reads only its own.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/data/document_source.hpp"

namespace muster::engine::data {

struct row_piece {
  std::int64_t document = 0;
  std::int64_t offset = 0;  // first token of the piece within its document
  std::int64_t length = 0;
};

struct pack_options {
  std::int64_t row_tokens = 0;
  bool pack = true;
  std::uint64_t seed = 0;
};

// One row, ready for the model: each vector is row_tokens long.
struct packed_row {
  std::vector<std::int64_t> tokens, positions, segments, labels;
};

class pack_plan {
 public:
  pack_plan(const document_source& source, pack_options options);
  std::int64_t rows_per_epoch() const { return rows_per_epoch_; }
  // The pieces of global row `row` (any epoch).
  std::vector<row_piece> pieces(std::int64_t row);
  // Row `row` read from the source.
  packed_row row(std::int64_t row);

 private:
  std::vector<std::vector<row_piece>> lay_out(std::int64_t epoch) const;
  const document_source& source_;
  pack_options options_;
  std::int64_t rows_per_epoch_ = 0;
  std::int64_t epoch_ = -1;                      // the epoch laid out in rows_
  std::vector<std::vector<row_piece>> rows_;
};

// The permutation of [0, n) for `seed` (Fisher-Yates over splitmix64).
std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed);

struct batch_shape {
  int micro_batch_size = 1;
  int grad_accum_steps = 1;
  int dp_size = 1;
};

// The global row of sequence `i` of micro-batch `micro` of step `step` on data-parallel rank
// `dp_rank`: steps take global-batch-sized blocks; inside, micro-batches, then ranks.
std::int64_t global_row(std::int64_t step, int micro, int dp_rank, int i, const batch_shape& b);

}  // namespace muster::engine::data
