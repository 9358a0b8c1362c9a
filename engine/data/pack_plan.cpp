// Rows of documents: see pack_plan.hpp.
#include "engine/data/pack_plan.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace muster::engine::data {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::uint64_t state = seed;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(splitmix64(state) % std::uint64_t(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

pack_plan::pack_plan(const document_source& source, pack_options options)
    : source_(source), options_(options) {
  MUSTER_CHECK(options.row_tokens >= 2, errc::invalid_input,
               "rows of {} tokens cannot train (a token predicts the next one)", options.row_tokens);
  rows_ = lay_out(0);
  epoch_ = 0;
  rows_per_epoch_ = static_cast<std::int64_t>(rows_.size());
  MUSTER_CHECK(rows_per_epoch_ > 0, errc::invalid_input, "{} holds no tokens",
               source.describe());
}

std::vector<std::vector<row_piece>> pack_plan::lay_out(std::int64_t epoch) const {
  const auto width = options_.row_tokens;
  std::vector<std::vector<row_piece>> rows;
  std::vector<row_piece> current;
  std::int64_t room = width;
  auto close_row = [&] {
    rows.push_back(std::move(current));
    current.clear();
    room = width;
  };
  for (auto doc : shuffled(source_.num_documents(), options_.seed + 0x51ed2701ULL * std::uint64_t(epoch))) {
    const auto length = source_.document_length(doc);
    for (std::int64_t offset = 0; offset < length;) {
      const auto take = std::min(room, length - offset);
      current.push_back({doc, offset, take});
      offset += take;
      room -= take;
      if (room == 0 || !options_.pack) close_row();
    }
  }
  if (!current.empty()) close_row();
  return rows;
}

std::vector<row_piece> pack_plan::pieces(std::int64_t row) {
  const auto epoch = row / rows_per_epoch_;
  if (epoch != epoch_) {
    rows_ = lay_out(epoch);  // as many rows as every epoch: packed rows fill continuously,
    epoch_ = epoch;          // unpacked ones depend on the documents' lengths alone
  }
  return rows_.at(static_cast<std::size_t>(row % rows_per_epoch_));
}

packed_row pack_plan::row(std::int64_t row) {
  const auto width = static_cast<std::size_t>(options_.row_tokens);
  packed_row out;
  out.tokens.reserve(width);
  std::int64_t segment = 0;
  for (const auto& piece : pieces(row)) {
    const auto first = out.tokens.size();
    source_.read(piece.document, piece.offset, piece.length, out.tokens);
    for (std::int64_t t = 0; t < piece.length; ++t) {
      out.positions.push_back(t);
      out.segments.push_back(segment);
      out.labels.push_back(t + 1 < piece.length ? out.tokens[first + std::size_t(t) + 1] : -100);
    }
    ++segment;
  }
  while (out.tokens.size() < width) {  // padding: its own segment, no loss
    out.positions.push_back(static_cast<std::int64_t>(out.tokens.size()));
    out.tokens.push_back(0);
    out.segments.push_back(segment);
    out.labels.push_back(-100);
  }
  return out;
}

std::int64_t global_row(std::int64_t step, int micro, int dp_rank, int i, const batch_shape& b) {
  const std::int64_t per_micro = std::int64_t(b.micro_batch_size) * b.dp_size;
  return step * per_micro * b.grad_accum_steps + micro * per_micro +
         std::int64_t(dp_rank) * b.micro_batch_size + i;
}

}  // namespace muster::engine::data
