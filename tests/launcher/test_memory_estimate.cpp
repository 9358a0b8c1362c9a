// Unit tests of launcher/plan/memory_estimate: two layouts computed by hand category by
// category (Qwen3-30B-A3B on 16 GPUs with ZeRO-3, Mixtral-8x7B with TP 2, PP 2, EP 4, ZeRO-2),
// Megatron's 6 + 12/DP bytes a parameter, the order of the sharding strategies, precisions and
// recompute modes, the interleaving penalty, sequence parallelism, a dense model and MLA.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "launcher/plan/memory_estimate.hpp"
#include "launcher/plan/model_params.hpp"
#include "tests/launcher/published_models.hpp"
#include "tests/support/expect_error.hpp"

using muster::job_config;
using namespace muster::launcher::plan;

namespace {

constexpr std::int64_t kGiB = 1LL << 30;

layout make_layout(int tp, int cp, int dp, int pp, int etp, int ep, int edp, int vpp = 1,
                   bool sp = false) {
  layout l;
  l.attn = {tp, cp, 1, dp, pp};
  l.expert = {etp, 1, ep, edp, pp};
  l.world = l.attn.size();
  l.vpp = vpp;
  l.sequence_parallel = sp;
  return l;
}

batch_plan make_batch(int micro, int accum, int row_tokens) {
  batch_plan b;
  b.micro_batch_size = micro;
  b.grad_accum_steps = accum;
  b.row_tokens = row_tokens;
  return b;
}

// Qwen/Qwen3-30B-A3B, bf16 with fp32 gradients, ZeRO-3, no recompute.
job_config qwen3_30b_a3b() {
  job_config c;
  c.model = muster::test::qwen3_30b_a3b();
  c.parallel.sharding = "optim_grads_params";
  c.train.precision = "bf16";
  c.train.grad_reduce_dtype = "fp32";
  c.train.recompute = "none";
  return c;
}

// mistralai/Mixtral-8x7B-v0.1.
job_config mixtral_8x7b() {
  job_config c;
  c.model = muster::test::mixtral_8x7b();
  return c;
}

// A dense model whose every unit divides by 8 (so no shard is padded).
job_config dense_model() {
  job_config c;
  auto& m = c.model;
  m.num_layers = 4;
  m.hidden_size = 1024;
  m.ffn_hidden_size = 4096;
  m.num_attention_heads = 8;
  m.num_query_groups = 8;
  m.vocab_size = 32000;
  m.qk_norm = false;
  m.num_experts = 0;
  return c;
}

std::int64_t persistent(const stage_memory& s) {
  return s.params_bytes + s.grads_bytes + s.optimizer_bytes;
}

}  // namespace

TEST_CASE("Qwen3-30B-A3B on 16 GPUs with EP 8 and ZeRO-3 matches a hand computation",
          "[memory_estimate]") {
  const layout l = make_layout(/*tp*/ 1, /*cp*/ 1, /*dp*/ 16, /*pp*/ 1, /*etp*/ 1, /*ep*/ 8,
                               /*edp*/ 2);
  const memory_estimate e = estimate_memory(qwen3_30b_a3b(), l, make_batch(1, 4, 4096));
  REQUIRE(e.stages.size() == 1);
  const stage_memory& s = e.worst;

  // Shards: embedding over 16; per layer the dense unit (attention 18874368, norms 4352, router
  // 262144) over 16 and this EP rank's 16 experts (16 * 3 * 2048 * 768) over EDP 2; the head
  // (lm_head + model.norm) over 16.
  const std::int64_t embedding = 151936LL * 2048 / 16;            // 19447808
  const std::int64_t dense = (18'874'368 + 4352 + 262'144) / 16;  // 1196304
  const std::int64_t experts = 16 * 3LL * 2048 * 768 / 2;         // 37748736
  const std::int64_t head = (151936LL * 2048 + 2048) / 16;        // 19447936
  const std::int64_t shard = embedding + 48 * (dense + experts) + head;
  CHECK(shard == 1'908'257'664);
  CHECK(s.params_bytes == 2 * shard);
  CHECK(s.grads_bytes == 4 * shard);
  CHECK(s.optimizer_bytes == 12 * shard);

  // One layer, one micro-batch of t = 4096 tokens, 2 bytes an element (h = 2048):
  const std::int64_t t = 4096;
  const std::int64_t h = 2048;
  const std::int64_t rows = t * 8;                     // routed rows, top 8
  const std::int64_t layer = t * h * 2 * 2             // input_layernorm input, q/k/v input
                             + t * (32 + 4) * 128 * 2  // q_norm and k_norm inputs
                             + t * (32 + 8) * 128 * 2  // Q, K, V
                             + t * 32 * 128 * 2        // attention core output
                             + t * 32 * 4              // logsumexp (fp32)
                             + t * h * 2 * 2           // post_attention_layernorm, router input
                             + 2 * t * 128 * 4         // router logits and probs (fp32)
                             + rows * h * 2            // expert inputs
                             + 2 * rows * 768 * 2      // gate and up outputs
                             + rows * 768 * 2          // down_proj inputs
                             + rows * h * 2;           // expert outputs
  CHECK(layer == 604'504'064);
  CHECK(s.microbatches_in_flight == 1.0);
  CHECK(s.activations_bytes == 48 * layer + 2 * t * h * 2);  // + model.norm and lm_head inputs

  // ZeRO-3: the largest gather group is the head (311166976 > a layer's 94638336), twice in
  // bf16 (current + prefetch) and twice in fp32 grads (the one computing, the one reducing).
  CHECK(s.fsdp_buffers_bytes == (151936LL * 2048 + 2048) * (2 + 2 + 4 + 4));
  CHECK(s.moe_dispatch_bytes == 2 * rows * h * 2);
  CHECK(s.logits_bytes == t * 151936 * (2 + 4));
  CHECK(s.reserved_bytes == 2 * kGiB);
  // 68.3 GiB: 67.1 before the reducing unit's gradients were counted
  const std::int64_t total = 72'037'621'504 + (151936LL * 2048 + 2048) * 4;
  CHECK(s.total_bytes() == total);
  CHECK(e.fits());
  CHECK(e.margin_bytes() == 80 * kGiB - total);
}

TEST_CASE("Mixtral-8x7B with TP 2, PP 2, EP 4 and ZeRO-2 matches a hand computation",
          "[memory_estimate]") {
  job_config c = mixtral_8x7b();
  c.parallel.sharding = "optim_grads";
  c.train.recompute = "selective";
  const layout l = make_layout(2, 1, 4, 2, /*etp*/ 1, /*ep*/ 4, /*edp*/ 2, 1, /*sp*/ true);
  const memory_estimate e = estimate_memory(c, l, make_batch(1, 8, 4096));
  REQUIRE(e.stages.size() == 2);

  // Per rank: embedding 16000 x 4096 (vocab over TP 2); per layer dense 21012480 (q, o halves,
  // k, v halves, norms, router) and 2 experts of 3 x 4096 x 14336; head = embedding + norm.
  const std::int64_t embedding = 16000LL * 4096;
  const std::int64_t dense = 2 * 2048LL * 4096 + 2 * 512LL * 4096 + 8192 + 8 * 4096;
  const std::int64_t experts = 2 * 3LL * 4096 * 14336;
  const std::int64_t head = embedding + 4096;
  const std::int64_t numel0 = embedding + 16 * (dense + experts);
  const std::int64_t shard0 = embedding / 4 + 16 * (dense / 4 + experts / 2);
  const stage_memory& s0 = e.stages[0];
  CHECK(s0.params_bytes == 2 * numel0);  // ZeRO-2 keeps whole bf16 params
  CHECK(s0.grads_bytes == 4 * shard0);
  CHECK(s0.optimizer_bytes == 12 * shard0);

  // Selective recompute, sequence parallel: t = 4096, t_sp = 2048, 16 heads and 4 groups a
  // rank; R = 4096 * 2 * ETP 1 / TP 2 = 4096 routed rows.
  const std::int64_t t = 4096;
  const std::int64_t t_sp = 2048;
  const std::int64_t h = 4096;
  const std::int64_t rows = 4096;
  const std::int64_t layer = t_sp * h * 2 * 4              // norm and projection inputs
                             + t * (16 + 2 * 4) * 128 * 2  // Q, K, V
                             + 2 * t_sp * 8 * 4            // router logits and probs
                             + rows * h * 2 * 2            // expert inputs and outputs
                             + 3 * rows * 14336 * 2;       // gate, up outputs, down inputs
  CHECK(layer == 511'836'160);
  CHECK(s0.microbatches_in_flight == 2.0);  // min(PP - 0, 8)
  CHECK(s0.activations_bytes == 2 * 16 * layer);
  // two layers' grads, unsharded: the one computing, the one reducing
  CHECK(s0.fsdp_buffers_bytes == (dense + experts) * 8);
  CHECK(s0.moe_dispatch_bytes == 2 * rows * h * 2);
  CHECK(s0.logits_bytes == 0);
  CHECK(s0.total_bytes() == 78'868'545'536 + (dense + experts) * 4);  // + the reducing layer's

  const stage_memory& s1 = e.stages[1];
  const std::int64_t numel1 = head + 16 * (dense + experts);
  const std::int64_t shard1 = head / 4 + 16 * (dense / 4 + experts / 2);
  CHECK(s1.params_bytes == 2 * numel1);
  CHECK(s1.grads_bytes == 4 * shard1);
  CHECK(s1.microbatches_in_flight == 1.0);
  CHECK(s1.activations_bytes == 16 * layer + 2 * t_sp * h * 2);
  CHECK(s1.logits_bytes == t * 16000 * (2 + 4));
  CHECK(s1.total_bytes() == 71'105'961'984 + (dense + experts) * 4);  // + the reducing layer's
  CHECK(e.stage() == 0);
  CHECK(e.total_bytes() == s0.total_bytes());
}

TEST_CASE("bf16 with fp32 grads and a sharded optimizer costs Megatron's 6 + 12/DP bytes",
          "[memory_estimate]") {
  job_config c = dense_model();
  c.parallel.sharding = "optim";
  const std::int64_t n = make_model_params(c.model).total;
  for (int dp : {1, 2, 4, 8}) {
    const memory_estimate e =
        estimate_memory(c, make_layout(1, 1, dp, 1, 1, 1, dp), make_batch(1, 1, 256));
    INFO("dp = " << dp);
    CHECK(persistent(e.worst) == 6 * n + 12 * n / dp);
  }
  // Megatron shards over the dp-cp group: DP 4 x CP 2 is 8 ranks.
  const memory_estimate cp =
      estimate_memory(c, make_layout(1, 2, 4, 1, 1, 1, 8), make_batch(1, 1, 256));
  CHECK(persistent(cp.worst) == 6 * n + 12 * n / 8);
}

TEST_CASE("each sharding strategy holds less than the one before it", "[memory_estimate]") {
  job_config c = qwen3_30b_a3b();
  const layout l = make_layout(1, 1, 16, 1, 1, 8, 2);
  const model_params params = make_model_params(c.model);  // made once for the four
  std::int64_t previous = 0;
  for (const char* strategy : {"no_shard", "optim", "optim_grads", "optim_grads_params"}) {
    c.parallel.sharding = strategy;
    const stage_memory s = estimate_memory(c, params, l, make_batch(1, 1, 4096)).worst;
    INFO(strategy);
    if (previous > 0) CHECK(persistent(s) < previous);
    previous = persistent(s);
  }
  c.parallel.sharding = "no_shard";
  const stage_memory none = estimate_memory(c, l, make_batch(1, 1, 4096)).worst;
  CHECK(none.fsdp_buffers_bytes == 0);
  // No sharding: 18 bytes a held element (2 params + 4 grads + 12 optimizer).
  const stage_slice slice = slice_stage(params, l, 0);
  CHECK(persistent(none) == 18 * slice.numel());
}

TEST_CASE("fp32 doubles params and activations and drops the main copy", "[memory_estimate]") {
  job_config c = mixtral_8x7b();
  const layout l = make_layout(2, 1, 4, 2, 1, 4, 2);
  const stage_memory bf16 = estimate_memory(c, l, make_batch(1, 8, 4096)).stages[0];
  c.train.precision = "fp32";
  const stage_memory fp32 = estimate_memory(c, l, make_batch(1, 8, 4096)).stages[0];
  CHECK(fp32.params_bytes == 2 * bf16.params_bytes);
  CHECK(fp32.grads_bytes == bf16.grads_bytes);                  // both fp32 (grad_reduce_dtype)
  CHECK(2 * bf16.optimizer_bytes == 3 * fp32.optimizer_bytes);  // 12 vs 8 bytes
  CHECK(fp32.activations_bytes > bf16.activations_bytes);
  CHECK(fp32.activations_bytes < 2 * bf16.activations_bytes);  // fp32 stats stay 4 bytes
  CHECK(fp32.moe_dispatch_bytes == 2 * bf16.moe_dispatch_bytes);
  CHECK(fp32.total_bytes() > bf16.total_bytes());
  c.train.precision = "bf16";
  c.train.grad_reduce_dtype = "bf16";
  const stage_memory bf16_grads = estimate_memory(c, l, make_batch(1, 8, 4096)).stages[0];
  CHECK(2 * bf16_grads.grads_bytes == bf16.grads_bytes);
}

TEST_CASE("recompute none stores more than selective, and selective more than full",
          "[memory_estimate]") {
  job_config c = qwen3_30b_a3b();
  const layout l = make_layout(1, 1, 16, 1, 1, 8, 2);
  const batch_plan b = make_batch(1, 1, 4096);
  c.train.recompute = "none";
  const std::int64_t none = estimate_memory(c, l, b).worst.activations_bytes;
  c.train.recompute = "selective";
  const std::int64_t selective = estimate_memory(c, l, b).worst.activations_bytes;
  c.train.recompute = "full";
  const std::int64_t full = estimate_memory(c, l, b).worst.activations_bytes;
  CHECK(none > selective);
  CHECK(selective > full);
  // Selective drops the core output and logsumexp of each of the 48 layers.
  CHECK(none - selective == 48 * (4096LL * 32 * 128 * 2 + 4096LL * 32 * 4));
  // Full: each layer's input, the head's two inputs, and one layer recomputed in full.
  CHECK(full == 48 * 4096LL * 2048 * 2 + 2 * 4096LL * 2048 * 2 + 604'504'064);
}

TEST_CASE("interleaving keeps more micro-batches in flight on every stage", "[memory_estimate]") {
  job_config c = mixtral_8x7b();
  const batch_plan b = make_batch(1, 8, 4096);
  const layout plain = make_layout(1, 1, 4, 4, 1, 4, 1);
  const layout interleaved = make_layout(1, 1, 4, 4, 1, 4, 1, /*vpp*/ 2);
  CHECK(microbatches_in_flight(plain, 8, 0) == 4.0);
  CHECK(microbatches_in_flight(interleaved, 8, 0) == 4.0 * (1 + 3.0 / 8));  // 5.5
  // Rank s holds 2(PP - s - 1) + (VPP - 1)PP + 1 chunks of half its layers: 11, 9, 7, 5 halves.
  CHECK(microbatches_in_flight(interleaved, 8, 1) == 4.5);
  CHECK(microbatches_in_flight(interleaved, 8, 3) == 2.5);
  CHECK(microbatches_in_flight(plain, 8, 3) == 1.0);
  // Fewer micro-batches than the warm-up needs: all of them, every chunk.
  CHECK(microbatches_in_flight(interleaved, 2, 0) == 2.0);
  const layout pp8v4 = make_layout(1, 1, 1, 8, 1, 1, 1, /*vpp*/ 4);
  CHECK(microbatches_in_flight(pp8v4, 64, 7) == (3 * 8 + 1) / 4.0);
  const memory_estimate p = estimate_memory(c, plain, b);
  const memory_estimate i = estimate_memory(c, interleaved, b);
  // Every Mixtral layer is alike, so stage 0's 8 layers store the same bytes either way.
  CHECK(i.stages[0].activations_bytes * 8 == p.stages[0].activations_bytes * 11);
  CHECK(i.stages[1].activations_bytes * 3 == p.stages[1].activations_bytes * 4.5);
  CHECK(i.stage() == 0);
}

TEST_CASE("a stage holds no more micro-batches than the step has", "[memory_estimate]") {
  const layout l = make_layout(1, 1, 2, 4, 1, 1, 2);
  CHECK(microbatches_in_flight(l, 2, 0) == 2.0);
  CHECK(microbatches_in_flight(l, 2, 2) == 2.0);
  CHECK(microbatches_in_flight(l, 2, 3) == 1.0);
  CHECK(microbatches_in_flight(l, 16, 0) == 4.0);
}

TEST_CASE("sequence parallelism divides the replicated activations by TP", "[memory_estimate]") {
  const job_config c = mixtral_8x7b();
  const batch_plan b = make_batch(1, 8, 4096);
  const layout tp = make_layout(2, 1, 4, 2, 1, 4, 2);
  const layout sp = make_layout(2, 1, 4, 2, 1, 4, 2, 1, /*sp*/ true);
  const auto without = layer_activation_terms(c, tp, b, 0);
  const auto with = layer_activation_terms(c, sp, b, 0);
  REQUIRE(without.size() == with.size());
  CHECK(without[0].name == "input_layernorm input");
  CHECK(without[0].bytes == 4096LL * 4096 * 2);
  CHECK(with[0].bytes == 2048LL * 4096 * 2);
  for (std::size_t i = 0; i < with.size(); ++i) {
    INFO(with[i].name);
    CHECK(with[i].bytes <= without[i].bytes);
  }
  CHECK(estimate_memory(c, sp, b).worst.activations_bytes <
        estimate_memory(c, tp, b).worst.activations_bytes);

  // Full recompute keeps each layer's input, split over TP too: last stage, 1 micro-batch.
  job_config full = c;
  full.train.recompute = "full";
  std::int64_t largest = 0;
  for (const auto& term : with) largest += term.bytes;
  CHECK(estimate_memory(full, sp, b).stages[1].activations_bytes ==
        16 * 2048LL * 4096 * 2 + 2 * 2048LL * 4096 * 2 + largest);
}

TEST_CASE("a dense model has no expert units and no dispatch buffers", "[memory_estimate]") {
  const job_config c = dense_model();
  const memory_estimate e =
      estimate_memory(c, make_layout(1, 1, 8, 1, 1, 1, 8), make_batch(2, 1, 1024));
  CHECK(e.worst.moe_dispatch_bytes == 0);
  const auto terms =
      layer_activation_terms(c, make_layout(1, 1, 8, 1, 1, 1, 8), make_batch(2, 1, 1024), 0);
  CHECK(std::none_of(terms.begin(), terms.end(), [](const activation_term& t) {
    return t.name.find("expert") != std::string::npos || t.name.find("router") != std::string::npos;
  }));
  // ZeRO-3 gather group: the embedding or head (32768000 + 1024) beats a layer.
  const std::int64_t unit = 32000LL * 1024 + 1024;
  CHECK(e.worst.fsdp_buffers_bytes == unit * (2 + 2 + 4 + 4));
  // gradients reduced as each unit's backward ends: one unit of them; reduced in bf16: the
  // reducing unit's copy too
  job_config waited = c;
  waited.parallel.overlap_grad_reduce = false;
  const auto at = [&](const job_config& x) {
    return estimate_memory(x, make_layout(1, 1, 8, 1, 1, 1, 8), make_batch(2, 1, 1024))
        .worst.fsdp_buffers_bytes;
  };
  CHECK(at(waited) == unit * (2 + 2 + 4));
  waited.train.grad_reduce_dtype = "bf16";
  CHECK(at(waited) == unit * (2 + 2 + 4 + 2));
}

TEST_CASE("MLA layers store their latent projections instead of q/k/v", "[memory_estimate]") {
  job_config c;
  c.model = muster::test::deepseek_v2_lite();
  const layout l = make_layout(1, 1, 8, 1, 1, 8, 1);
  const batch_plan b = make_batch(1, 1, 2048);
  const auto dense = layer_activation_terms(c, l, b, 0);
  const auto moe = layer_activation_terms(c, l, b, 1);
  auto bytes_of = [](const std::vector<activation_term>& terms, const std::string& name) {
    for (const auto& t : terms) {
      if (t.name == name) return t.bytes;
    }
    return std::int64_t{-1};
  };
  CHECK(bytes_of(moe, "kv_a_layernorm and kv_b_proj inputs") == 2 * 2048LL * 512 * 2);
  CHECK(bytes_of(moe, "attention core inputs (Q, K, V)") == 2048LL * 16 * (2 * 192 + 128) * 2);
  CHECK(bytes_of(moe, "shared expert down_proj input") == 2048LL * 2816 * 2);
  CHECK(bytes_of(dense, "mlp down_proj input") == 2048LL * 10944 * 2);
  CHECK(bytes_of(dense, "expert inputs") == -1);
  const memory_estimate e = estimate_memory(c, l, b);
  CHECK(e.worst.moe_dispatch_bytes == 2 * 2048LL * 6 * 2048 * 2);
  CHECK(e.fits());
}

TEST_CASE("a capacity factor scales the routed rows", "[memory_estimate]") {
  job_config c = mixtral_8x7b();
  const layout l = make_layout(1, 1, 8, 1, 1, 8, 1);
  const batch_plan b = make_batch(1, 1, 4096);
  const std::int64_t dropless = estimate_memory(c, l, b).worst.moe_dispatch_bytes;
  c.model.moe_capacity_factor = 1.5;
  CHECK(estimate_memory(c, l, b).worst.moe_dispatch_bytes * 2 == dropless * 3);
}

TEST_CASE("memory rows list every category, the total, the GPU and the margin",
          "[memory_estimate]") {
  memory_options small;
  small.gpu_memory_bytes = 16 * kGiB;
  const memory_estimate e = estimate_memory(qwen3_30b_a3b(), make_layout(1, 1, 16, 1, 1, 8, 2),
                                            make_batch(1, 1, 4096), small);
  const auto rows = memory_rows(e);
  std::vector<std::string> names;
  std::int64_t categories = 0;
  for (const auto& [name, bytes] : rows) {
    names.push_back(name);
    if (name != "total" && name != "gpu_memory" && name != "margin") categories += bytes;
  }
  CHECK(names == std::vector<std::string>{"params", "grads", "optimizer", "activations",
                                          "fsdp_buffers", "moe_dispatch", "logits", "reserved",
                                          "total", "gpu_memory", "margin"});
  CHECK(categories == e.total_bytes());
  CHECK(rows[8].second == e.total_bytes());
  CHECK_FALSE(e.fits());
  CHECK(rows.back().second == 16 * kGiB - e.total_bytes());
  CHECK(rows.back().second < 0);
}

TEST_CASE("an unknown sharding, precision or recompute names the key", "[memory_estimate]") {
  const layout l = make_layout(1, 1, 8, 1, 1, 1, 8);
  job_config c = dense_model();
  c.parallel.sharding = "zero3";
  std::string msg = muster::test::expect_error(
      muster::errc::config, [&] { estimate_memory(c, l, make_batch(1, 1, 256)); });
  CHECK(msg.find("parallel.sharding: invalid value: zero3") != std::string::npos);
  c = dense_model();
  c.train.precision = "fp16";
  msg = muster::test::expect_error(muster::errc::config,
                                   [&] { estimate_memory(c, l, make_batch(1, 1, 256)); });
  CHECK(msg.find("train.precision") != std::string::npos);
  c = dense_model();
  c.train.recompute = "some";
  msg = muster::test::expect_error(muster::errc::config,
                                   [&] { estimate_memory(c, l, make_batch(1, 1, 256)); });
  CHECK(msg.find("train.recompute") != std::string::npos);
}

TEST_CASE("muster-train's layout keeps fp32 weights and gradients and no main copy under bf16",
          "[memory_estimate]") {
  job_config c = mixtral_8x7b();
  c.train.grad_reduce_dtype = "bf16";
  const layout l = make_layout(2, 1, 4, 2, 1, 4, 2);
  const batch_plan b = make_batch(1, 8, 4096);
  memory_options engine;
  engine.weights = weight_layout::muster_train;
  const stage_memory megatron = estimate_memory(c, l, b).stages[0];
  const stage_memory muster = estimate_memory(c, l, b, engine).stages[0];
  CHECK(muster.params_bytes == 2 * megatron.params_bytes);
  CHECK(muster.grads_bytes == 2 * megatron.grads_bytes);  // fp32, where Megatron keeps bf16
  CHECK(3 * muster.optimizer_bytes == 2 * megatron.optimizer_bytes);  // 8 vs 12 bytes
  CHECK(muster.activations_bytes == megatron.activations_bytes);      // autocast's bf16
  // its gathers carry fp32 weights: two units of 4 bytes where Megatron's carry 2
  CHECK(muster.fsdp_buffers_bytes > megatron.fsdp_buffers_bytes);
  // under fp32 the two layouts are one
  c.train.precision = "fp32";
  c.train.grad_reduce_dtype = "fp32";
  CHECK(estimate_memory(c, l, b, engine).stages[0].total_bytes() ==
        estimate_memory(c, l, b).stages[0].total_bytes());
  CHECK(parse_weight_layout("muster-train", "--engine") == weight_layout::muster_train);
  CHECK_THROWS_WITH(parse_weight_layout("deepspeed", "--engine"),
                    Catch::Contains("--engine: 'deepspeed' is not an engine"));
}
