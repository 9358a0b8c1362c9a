// The training loop of one rank on the license texts: the schedule by its definition, a loss
// that falls, runs that repeat bit for bit, and a loss per label token that does not depend on
// how a step's rows are split into micro-batches.
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include "engine/train/lr_schedule.hpp"
#include "engine/train/trainer.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/indexed_dataset_file.hpp"

using namespace muster;
using namespace muster::engine;

namespace {

job_config tiny_job() {
  job_config c;
  c.model.num_layers = 2;
  c.model.hidden_size = 32;
  c.model.ffn_hidden_size = 64;
  c.model.num_attention_heads = 4;
  c.model.num_query_groups = 2;
  c.model.vocab_size = 256;
  c.model.num_experts = 4;
  c.model.moe_ffn_hidden_size = 32;
  c.model.moe_router_topk = 2;
  c.model.moe_first_dense_layers = 1;
  c.train.micro_batch_size = 4;
  c.train.seq_length = 64;
  c.train.max_tokens_per_pack = 64;
  c.train.lr = 3e-3;
  c.train.min_lr = 3e-4;
  c.train.warmup_steps = 3;
  c.train.steps = 30;
  c.train.precision = "fp32";
  return c;
}

std::vector<double> losses(const job_config& c, int steps) {
  train::trainer t(c, data::open_documents("text", {"/usr/share/common-licenses"}));
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) out.push_back(t.step().loss);
  return out;
}

}  // namespace

TEST_CASE("the learning rate warms up linearly, then decays by a cosine to min_lr", "[train]") {
  train_section t;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.warmup_steps = 4;
  t.steps = 14;
  CHECK(train::lr_at(0, t) == Approx(0.25));
  CHECK(train::lr_at(3, t) == Approx(1.0));
  CHECK(train::lr_at(4, t) == Approx(1.0));
  CHECK(train::lr_at(8, t) == Approx(0.1 + 0.45 * (1 + std::cos(3.14159265358979 * 4 / 9))));
  CHECK(train::lr_at(13, t) == Approx(0.1));
}

TEST_CASE("a tiny MoE model's loss falls on the license texts, the same in every run",
          "[train]") {
  torch::set_num_threads(1);
  auto c = tiny_job();
  auto first = losses(c, 30), again = losses(c, 30);
  CHECK(first == again);  // bit for bit
  CHECK(first.front() > 5.0);  // about log(256) at the start
  CHECK(first.back() < first.front() - 1.5);  // about 5.5 -> 3.5
}

TEST_CASE("the loss per label token does not depend on how rows are split into micro-batches",
          "[train]") {
  torch::set_num_threads(1);
  auto one = tiny_job();
  one.model.moe_aux_loss_coeff = 0;  // the router losses are per micro-batch by definition
  auto split = one;
  split.train.micro_batch_size = 2;
  split.train.grad_accum_steps = 2;  // the same 4 rows per step, in two micro-batches
  auto a = losses(one, 4), b = losses(split, 4);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-5));
}

TEST_CASE("bf16 autocast trains like fp32, with fp32 main weights, the same in every run",
          "[train]") {
  torch::set_num_threads(1);
  auto fp32 = tiny_job();
  auto bf16 = fp32;
  bf16.train.precision = "bf16";
  const auto a = losses(fp32, 30), b = losses(bf16, 30), again = losses(bf16, 30);
  CHECK(b == again);
  CHECK(b != a);  // bf16 matmuls did run
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(0.02));
  train::trainer t(bf16, data::open_documents("text", {"/usr/share/common-licenses"}));
  t.step();
  for (const auto& p : t.model().parameters()) CHECK(p.scalar_type() == torch::kFloat32);
}

TEST_CASE("deterministic mode turns on PyTorch's deterministic algorithms and repeats bit for bit",
          "[train]") {
  torch::set_num_threads(2);
  auto c = tiny_job();
  c.train.deterministic = true;
  const auto a = losses(c, 5), b = losses(c, 5);
  CHECK(at::globalContext().deterministicAlgorithms());
  CHECK(a == b);
  at::globalContext().setDeterministicAlgorithms(false, false);
}

TEST_CASE(
    "a Megatron dataset of uint16 ids trains a model of a smaller vocabulary, and an id past "
    "it is named as its row is read",
    "[train]") {
  muster::test::temp_dir dir;
  // uint16, as Megatron stores any vocabulary below 65500: the type says nothing of its size
  std::vector<std::vector<std::uint16_t>> docs;
  for (int d = 0; d < 16; ++d) {
    docs.emplace_back();
    for (int t = 0; t < 40; ++t)
      docs.back().push_back(static_cast<std::uint16_t>((d * 7 + t) % 300));
  }
  muster::test::write_indexed<std::uint16_t>(dir / "corpus", docs, 8);
  job_config c = tiny_job();
  c.model.vocab_size = 300;
  train::trainer t(c, data::open_documents("indexed", {dir / "corpus"}));
  CHECK(std::isfinite(t.step().loss));
  // an id the model has no embedding row for: refused with the row, the id and the key
  docs.back().back() = 4000;
  muster::test::write_indexed<std::uint16_t>(dir / "wider", docs, 8);
  c.train.max_tokens_per_pack = 0;  // one document a row: every row is read by the steps below
  c.train.seq_length = 40;
  train::trainer wide(c, data::open_documents("indexed", {dir / "wider"}));
  const auto e = muster::test::expect_error([&] {
    for (int i = 0; i < 8; ++i) wide.step();
  });
  CHECK(e.category() == muster::errc::invalid_input);
  CHECK_THAT(e.what(), Catch::Contains("holds token id 4000, which model.vocab_size = 300 has no "
                                       "embedding row for"));
  // named where it is in the files: the last sequence (15 of 0..15), its last token (39)
  CHECK_THAT(e.what(), Catch::StartsWith("data: sequence 15 of ") &&
                           Catch::Contains(" (its token 39) holds token id 4000"));
}
