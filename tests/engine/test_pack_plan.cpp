// Laying documents into rows: every token of an epoch lands in exactly one row, pieces never
// predict across documents, positions restart, each epoch reshuffles, and the rows a rank reads
// at a step are a pure function of the step (what an exact resume needs).
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/data/pack_plan.hpp"

using namespace muster::engine::data;

namespace {

// Documents held in memory; token values encode (document, index) as 100 * doc + index.
class memory_documents final : public document_source {
 public:
  explicit memory_documents(std::vector<std::int64_t> lengths) : lengths_(std::move(lengths)) {}
  std::int64_t num_documents() const override { return static_cast<std::int64_t>(lengths_.size()); }
  std::int64_t document_length(std::int64_t d) const override { return lengths_.at(std::size_t(d)); }
  void read(std::int64_t d, std::int64_t offset, std::int64_t count,
            std::vector<std::int64_t>& out) const override {
    for (std::int64_t i = offset; i < offset + count; ++i) out.push_back(100 * d + i);
  }
  std::int64_t vocab_size() const override { return 1000; }
  std::string describe() const override { return "memory"; }

 private:
  std::vector<std::int64_t> lengths_;
};

}  // namespace

TEST_CASE("a shuffle is a permutation fixed by its seed", "[data]") {
  auto a = shuffled(50, 7), b = shuffled(50, 7), c = shuffled(50, 8);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::set<std::int64_t>(a.begin(), a.end()).size() == 50);
}

TEST_CASE("packed rows hold every token of an epoch once, in segments that restart", "[data]") {
  memory_documents docs({5, 3, 9});
  pack_plan plan(docs, {4, true, 11});
  REQUIRE(plan.rows_per_epoch() == 5);  // 17 tokens in rows of 4, the last padded
  std::map<std::int64_t, int> seen;
  for (std::int64_t r = 0; r < plan.rows_per_epoch(); ++r) {
    auto row = plan.row(r);
    REQUIRE(row.tokens.size() == 4);
    std::size_t t = 0;
    std::int64_t segment = 0;
    for (auto piece : plan.pieces(r)) {
      for (std::int64_t i = 0; i < piece.length; ++i, ++t) {
        const auto token = 100 * piece.document + piece.offset + i;
        ++seen[token];
        CHECK(row.tokens[t] == token);
        CHECK(row.positions[t] == i);  // restarts in every piece
        CHECK(row.segments[t] == segment);
        CHECK(row.labels[t] == (i + 1 < piece.length ? token + 1 : -100));  // never across
      }
      ++segment;
    }
    for (; t < 4; ++t) {  // padding: no loss, a segment of its own
      CHECK(row.labels[t] == -100);
      CHECK(row.segments[t] == segment);
    }
  }
  CHECK(seen.size() == 17);
  for (auto& [token, count] : seen) CHECK(count == 1);
}

TEST_CASE("unpacked rows hold one piece of one document each", "[data]") {
  memory_documents docs({5, 3, 9});
  pack_plan plan(docs, {4, false, 11});
  REQUIRE(plan.rows_per_epoch() == 2 + 1 + 3);
  for (std::int64_t r = 0; r < plan.rows_per_epoch(); ++r) CHECK(plan.pieces(r).size() == 1);
}

TEST_CASE("each epoch reshuffles the same documents", "[data]") {
  memory_documents docs({2, 2, 2, 2, 2, 2, 2, 2});
  pack_plan plan(docs, {2, true, 3});
  std::vector<std::int64_t> first, second;
  for (std::int64_t r = 0; r < 8; ++r) first.push_back(plan.pieces(r)[0].document);
  for (std::int64_t r = 8; r < 16; ++r) second.push_back(plan.pieces(r)[0].document);
  CHECK(first != second);
  CHECK(std::set<std::int64_t>(second.begin(), second.end()).size() == 8);
  CHECK(plan.pieces(3)[0].document == first[3]);  // going back to epoch 0 gives it again
}

TEST_CASE("rows are dealt by step, micro-batch and rank without gaps or overlaps", "[data]") {
  batch_shape b{2, 3, 4};  // micro 2, accumulation 3, 4 data-parallel ranks: 24 rows a step
  std::set<std::int64_t> rows;
  for (std::int64_t step = 0; step < 5; ++step)
    for (int micro = 0; micro < 3; ++micro)
      for (int rank = 0; rank < 4; ++rank)
        for (int i = 0; i < 2; ++i) rows.insert(global_row(step, micro, rank, i, b));
  CHECK(rows.size() == 5 * 24);
  CHECK(*rows.rbegin() == 5 * 24 - 1);
  CHECK(global_row(3, 0, 0, 0, b) == 72);  // a resume at step 3 starts at row 72
}
