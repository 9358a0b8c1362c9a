// Unit tests of launcher/plan/model_params: the parameter counts of published models (set here
// field by field from their config.json, the totals computed by hand in the test), the tensor
// names and shapes, which layers are MoE, the FLOPs per token, and what one rank of a pipeline
// stage holds under TP/ETP/EP and FSDP sharding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "launcher/plan/model_params.hpp"
#include "tests/launcher/published_models.hpp"

using muster::model_section;
using namespace muster::launcher::plan;
using namespace muster::test;

namespace {


layout make_layout(int tp, int cp, int dp, int pp, int etp, int ep, int edp, int vpp = 1) {
  layout l;
  l.attn = {tp, cp, 1, dp, pp};
  l.expert = {etp, 1, ep, edp, pp};
  l.world = l.attn.size();
  l.vpp = vpp;
  return l;
}

const param_tensor* find(const model_params& p, const std::string& name) {
  auto it = std::find_if(p.tensors.begin(), p.tensors.end(),
                         [&](const param_tensor& t) { return t.name == name; });
  return it == p.tensors.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("Qwen3-30B-A3B has 30.5B parameters of which 3.3B are active", "[model_params]") {
  const model_params p = make_model_params(qwen3_30b_a3b());
  // Attention: q 2048x(32*128), k and v 2048x(4*128), o (32*128)x2048.
  const std::int64_t attention = 2048LL * 4096 + 2 * 2048LL * 512 + 4096LL * 2048;  // 18874368
  const std::int64_t norms = 2 * 128 + 2 * 2048;  // q_norm, k_norm; two layer norms
  const std::int64_t router = 128LL * 2048;
  const std::int64_t one_expert = 3LL * 2048 * 768;  // gate, up, down: 4718592
  const std::int64_t layer = attention + norms + router + 128 * one_expert;  // 623120640
  const std::int64_t embedding = 151936LL * 2048;                            // 311164928
  const std::int64_t total = 48 * layer + 2 * embedding + 2048;  // + lm_head + model.norm
  CHECK(layer == 623'120'640);
  CHECK(total == 30'532'122'624);
  CHECK(p.total == total);

  const std::int64_t active_layer = attention + norms + router + 8 * one_expert;  // 56889600
  const std::int64_t active = 48 * active_layer + 2 * embedding + 2048;
  CHECK(active == 3'353'032'704);
  CHECK(p.active == active);
  // Matmul weights: less the embedding lookup and the norms.
  CHECK(p.active_matmul == active - embedding - 48 * norms - 2048);
}

TEST_CASE("Mixtral-8x7B has 46.7B parameters of which 12.9B are active", "[model_params]") {
  const model_params p = make_model_params(mixtral_8x7b());
  const std::int64_t attention = 4096LL * 4096 + 2 * 4096LL * 1024 + 4096LL * 4096;  // 41943040
  const std::int64_t norms = 2 * 4096;
  const std::int64_t router = 8 * 4096;
  const std::int64_t one_expert = 3LL * 4096 * 14336;                      // 176160768
  const std::int64_t layer = attention + norms + router + 8 * one_expert;  // 1451270144
  const std::int64_t embedding = 32000LL * 4096;
  CHECK(32 * layer + 2 * embedding + 4096 == 46'702'792'704);
  CHECK(p.total == 46'702'792'704);
  const std::int64_t active_layer = attention + norms + router + 2 * one_expert;  // 394305536
  CHECK(32 * active_layer + 2 * embedding + 4096 == 12'879'925'248);
  CHECK(p.active == 12'879'925'248);
}

TEST_CASE("DeepSeek-V2-Lite with MLA and shared experts has 15.7B parameters", "[model_params]") {
  const model_params p = make_model_params(deepseek_v2_lite());
  // MLA: q_proj 2048 -> 16*(128+64); kv_a_proj_with_mqa 2048 -> 512+64; kv_a_layernorm 512;
  // kv_b_proj 512 -> 16*(128+128); o_proj 16*128 -> 2048.
  const std::int64_t mla = 2048LL * 3072 + 2048LL * 576 + 512 + 512LL * 4096 + 2048LL * 2048;
  CHECK(mla == 13'763'072);
  const std::int64_t norms = 2 * 2048;
  const std::int64_t dense_mlp = 3LL * 2048 * 10944;  // layer 0 (first_k_dense_replace = 1)
  const std::int64_t one_expert = 3LL * 2048 * 1408;  // 8650752
  const std::int64_t shared = 3LL * 2048 * 2816;
  const std::int64_t moe = 64LL * 2048 + 64 * one_expert + shared;  // router + experts + shared
  const std::int64_t embedding = 102400LL * 2048;
  const std::int64_t total =
      (mla + norms + dense_mlp) + 26 * (mla + norms + moe) + 2 * embedding + 2048;
  CHECK(total == 15'706'484'224);  // published: 15.7B
  CHECK(p.total == total);
  // Published "2.4B activated" leaves out the 0.21B embedding lookup.
  const std::int64_t active_moe = 64LL * 2048 + 6 * one_expert + shared;
  const std::int64_t active =
      (mla + norms + dense_mlp) + 26 * (mla + norms + active_moe) + 2 * embedding + 2048;
  CHECK(active == 2'661'150'208);
  CHECK(p.active == active);
  CHECK(p.active - embedding == 2'451'435'008);

  REQUIRE(find(p, "model.layers.1.self_attn.kv_b_proj.weight") != nullptr);
  CHECK(find(p, "model.layers.1.self_attn.kv_b_proj.weight")->shape ==
        std::vector<std::int64_t>{4096, 512});
  CHECK(find(p, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight")->split ==
        tp_split::replicated);
  CHECK(find(p, "model.layers.0.mlp.gate_proj.weight") != nullptr);
  CHECK(find(p, "model.layers.0.mlp.gate.weight") == nullptr);
  CHECK(find(p, "model.layers.1.mlp.shared_expert.down_proj.weight")->shape ==
        std::vector<std::int64_t>{2048, 2816});
}

TEST_CASE("MLA with a query LoRA has q_a_proj, q_a_layernorm and q_b_proj", "[model_params]") {
  model_section m = deepseek_v2_lite();
  m.q_lora_rank = 1536;  // as DeepSeek-V2/V3
  const model_params p = make_model_params(m);
  CHECK(find(p, "model.layers.0.self_attn.q_proj.weight") == nullptr);
  CHECK(find(p, "model.layers.0.self_attn.q_a_proj.weight")->shape ==
        std::vector<std::int64_t>{1536, 2048});
  CHECK(find(p, "model.layers.0.self_attn.q_a_layernorm.weight")->numel == 1536);
  CHECK(find(p, "model.layers.0.self_attn.q_b_proj.weight")->shape ==
        std::vector<std::int64_t>{16 * 192, 1536});
  const std::int64_t q_proj = 2048LL * 3072;
  const std::int64_t q_lora = 2048LL * 1536 + 1536 + 1536LL * 3072;
  CHECK(p.total == 15'706'484'224 + 27 * (q_lora - q_proj));
}

TEST_CASE("Qwen1.5-MoE-A2.7B with biases and a gated shared expert has 14.3B parameters",
          "[model_params]") {
  const model_params p = make_model_params(qwen15_moe_a27b());
  const std::int64_t attention = 4 * 2048LL * 2048 + 3 * 2048;  // q, k, v, o + q/k/v biases
  const std::int64_t norms = 2 * 2048;
  const std::int64_t router = 60 * 2048;
  const std::int64_t one_expert = 3LL * 2048 * 1408;
  const std::int64_t shared = 3LL * 2048 * 5632 + 2048;  // + shared_expert_gate (1 x 2048)
  const std::int64_t embedding = 151936LL * 2048;
  const std::int64_t total =
      24 * (attention + norms + router + 60 * one_expert + shared) + 2 * embedding + 2048;
  CHECK(total == 14'315'784'192);
  CHECK(p.total == total);
  const std::int64_t active =
      24 * (attention + norms + router + 4 * one_expert + shared) + 2 * embedding + 2048;
  CHECK(active == 2'689'173'504);  // published: 2.7B activated
  CHECK(p.active == active);

  const param_tensor* bias = find(p, "model.layers.5.self_attn.k_proj.bias");
  REQUIRE(bias != nullptr);
  CHECK(bias->split == tp_split::column);
  CHECK(find(p, "model.layers.5.self_attn.o_proj.bias") == nullptr);
  const param_tensor* gate = find(p, "model.layers.5.mlp.shared_expert_gate.weight");
  REQUIRE(gate != nullptr);
  CHECK(gate->shape == std::vector<std::int64_t>{1, 2048});
  CHECK(gate->split == tp_split::replicated);
  CHECK_FALSE(gate->expert);
}

TEST_CASE("a dense model with tied embeddings has no lm_head and every parameter active",
          "[model_params]") {
  const model_params p = make_model_params(qwen3_0_6b());
  const std::int64_t attention = 1024LL * 2048 + 2 * 1024LL * 1024 + 2048LL * 1024;
  const std::int64_t layer = attention + 2 * 128 + 2 * 1024 + 3LL * 1024 * 3072;
  CHECK(28 * layer == 440'466'432);  // published: 0.44B non-embedding
  const std::int64_t total = 28 * layer + 151936LL * 1024 + 1024;
  CHECK(total == 596'049'920);  // published: 0.6B
  CHECK(p.total == total);
  CHECK(p.active == total);
  CHECK(find(p, "lm_head.weight") == nullptr);
  CHECK(std::none_of(p.tensors.begin(), p.tensors.end(),
                     [](const param_tensor& t) { return t.expert; }));
  CHECK(std::none_of(p.moe_layers.begin(), p.moe_layers.end(), [](bool b) { return b; }));
  // The tied output projection still multiplies: vocab x hidden counts in the FLOPs.
  const std::int64_t matmul = 28 * (attention + 3LL * 1024 * 3072) + 151936LL * 1024;
  CHECK(p.active_matmul == matmul);
}

TEST_CASE("tensors carry Hugging Face names, shapes and how TP splits them", "[model_params]") {
  const model_params p = make_model_params(qwen3_30b_a3b());
  // embedding, 48 x (q, k, v, o, q_norm, k_norm, gate, 128 x 3 experts, 2 norms), norm, lm_head
  CHECK(p.tensors.size() == 1 + 48 * (6 + 1 + 128 * 3 + 2) + 2);
  CHECK(p.tensors.front().name == "model.embed_tokens.weight");
  CHECK(p.tensors.back().name == "lm_head.weight");

  const param_tensor* q = find(p, "model.layers.0.self_attn.q_proj.weight");
  REQUIRE(q != nullptr);
  CHECK(q->shape == std::vector<std::int64_t>{4096, 2048});
  CHECK(q->split == tp_split::column);
  CHECK(find(p, "model.layers.0.self_attn.o_proj.weight")->split == tp_split::row);
  CHECK(find(p, "model.layers.0.self_attn.q_norm.weight")->numel == 128);
  CHECK(find(p, "model.layers.0.input_layernorm.weight")->split == tp_split::replicated);

  const param_tensor* router = find(p, "model.layers.47.mlp.gate.weight");
  REQUIRE(router != nullptr);
  CHECK(router->shape == std::vector<std::int64_t>{128, 2048});
  CHECK(router->split == tp_split::replicated);
  CHECK_FALSE(router->expert);

  const param_tensor* down = find(p, "model.layers.47.mlp.experts.127.down_proj.weight");
  REQUIRE(down != nullptr);
  CHECK(down->shape == std::vector<std::int64_t>{2048, 768});
  CHECK(down->expert);
  CHECK(down->expert_index == 127);
  CHECK(down->layer == 47);
  CHECK(down->split == tp_split::row);
  CHECK(find(p, "lm_head.weight")->block == param_block::head);
  CHECK(find(p, "lm_head.weight")->split == tp_split::vocab);
}

TEST_CASE("rank_numel splits the right dimension and rounds vocab rows up", "[model_params]") {
  const model_params p = make_model_params(qwen3_30b_a3b());
  CHECK(find(p, "model.layers.0.self_attn.q_proj.weight")->rank_numel(4) == 1024LL * 2048);
  CHECK(find(p, "model.layers.0.self_attn.o_proj.weight")->rank_numel(4) == 2048LL * 1024);
  CHECK(find(p, "model.layers.0.self_attn.k_norm.weight")->rank_numel(4) == 128);
  // 151936 / 3 = 50645.33: every rank holds ceil = 50646 rows.
  CHECK(find(p, "model.embed_tokens.weight")->rank_numel(3) == 50646LL * 2048);
}

TEST_CASE("MoE layers are every n-th after the leading dense ones", "[model_params]") {
  model_section m = deepseek_v2_lite();
  CHECK_FALSE(is_moe_layer(m, 0));
  CHECK(is_moe_layer(m, 1));
  CHECK(is_moe_layer(m, 26));
  // Qwen2-MoE with decoder_sparse_step 2 (MoE when (i + 1) % 2 == 0) is read as 1 leading dense
  // layer and a frequency of 2: layers 1, 3, 5 are MoE.
  m.moe_first_dense_layers = 1;
  m.moe_layer_freq = 2;
  CHECK_FALSE(is_moe_layer(m, 0));
  CHECK(is_moe_layer(m, 1));
  CHECK_FALSE(is_moe_layer(m, 2));
  CHECK(is_moe_layer(m, 3));
  // DeepSeek (MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0) agrees whenever
  // first_k_dense_replace is a multiple of the frequency, which the config reader checks.
  m.moe_first_dense_layers = 2;
  CHECK_FALSE(is_moe_layer(m, 1));
  CHECK(is_moe_layer(m, 2));
  CHECK_FALSE(is_moe_layer(m, 3));
  CHECK(is_moe_layer(m, 4));
  m.num_experts = 0;
  CHECK_FALSE(is_moe_layer(m, 4));
}

TEST_CASE("training FLOPs per token are 6 x active matmul weights plus attention",
          "[model_params]") {
  const model_section m = qwen3_30b_a3b();
  const model_params p = make_model_params(m);
  // 6 * (3353032704 active - 311164928 embedding - 48 * 4352 - 2048 norms)
  const std::int64_t matmul = 3'353'032'704LL - 311'164'928 - 48 * 4352 - 2048;
  CHECK(matmul == 3'041'656'832);
  const std::int64_t attention = 12LL * 48 * 4096 * 32 * 128;  // 12 * layers * seq * heads * d
  CHECK(train_flops_per_token(p, m, 4096) == 6 * matmul + attention);
  CHECK(train_flops_per_token(p, m, 4096) == 27'913'617'408);

  // MLA: scores over d + rope = 192, values over v_head_dim = 128.
  const model_section ds = deepseek_v2_lite();
  const model_params dp = make_model_params(ds);
  CHECK(train_flops_per_token(dp, ds, 2048) ==
        6 * dp.active_matmul + 6LL * 27 * 2048 * 16 * (192 + 128));
}

TEST_CASE("stages hold consecutive layers, interleaved in chunks with VPP", "[model_params]") {
  const layout two = make_layout(1, 1, 1, 2, 1, 1, 1);
  CHECK(stage_layers(8, two, 0) == std::vector<int>{0, 1, 2, 3});
  CHECK(stage_layers(8, two, 1) == std::vector<int>{4, 5, 6, 7});
  const layout interleaved = make_layout(1, 1, 1, 2, 1, 1, 1, 2);
  CHECK(stage_layers(8, interleaved, 0) == std::vector<int>{0, 1, 4, 5});
  CHECK(stage_layers(8, interleaved, 1) == std::vector<int>{2, 3, 6, 7});
  const layout four = make_layout(1, 1, 1, 4, 1, 1, 1, 3);
  CHECK(stage_layers(24, four, 3) == std::vector<int>{6, 7, 14, 15, 22, 23});
}

TEST_CASE("Qwen3-30B-A3B on 16 GPUs with EP 8 shards units over DP 16 and EDP 2",
          "[model_params]") {
  const model_params p = make_model_params(qwen3_30b_a3b());
  const layout l = make_layout(/*tp*/ 1, /*cp*/ 1, /*dp*/ 16, /*pp*/ 1, /*etp*/ 1, /*ep*/ 8,
                               /*edp*/ 2);
  const stage_slice s = slice_stage(p, l, 0);
  REQUIRE(s.units.size() == 1 + 48 * 2 + 1);
  CHECK(s.units[0].kind == unit_kind::embedding);
  CHECK(s.units[0].numel == 151936LL * 2048);
  CHECK(s.units[0].shard_numel() == 151936LL * 2048 / 16);  // 19447808
  CHECK(s.units[1].kind == unit_kind::dense);
  CHECK(s.units[1].numel == 18'874'368 + 256 + 4096 + 262'144);  // attention, norms, router
  CHECK(s.units[1].shard_ranks == 16);
  CHECK(s.units[2].kind == unit_kind::expert);
  CHECK(s.units[2].layer == 0);
  CHECK(s.units[2].numel == 128 / 8 * 3LL * 2048 * 768);  // 16 experts of this EP rank
  CHECK(s.units[2].shard_ranks == 2);
  CHECK(s.units[2].shard_numel() == 37'748'736);
  CHECK(s.units.back().kind == unit_kind::head);
  CHECK(s.units.back().numel == 2048 + 151936LL * 2048);
  // Per rank: 19447808 + 48 * (19140864/16 + 37748736) + 311166976/16.
  CHECK(s.shard_numel() == 19'447'808 + 48 * (1'196'304 + 37'748'736) + 19'447'936);
}

TEST_CASE("Mixtral with TP 2 PP 2 EP 4 splits attention over TP and experts over EP",
          "[model_params]") {
  const model_params p = make_model_params(mixtral_8x7b());
  const layout l = make_layout(2, 1, 4, 2, /*etp*/ 1, /*ep*/ 4, /*edp*/ 2);
  const stage_slice first = slice_stage(p, l, 0);
  const stage_slice last = slice_stage(p, l, 1);
  CHECK(first.layers.front() == 0);
  CHECK(last.layers.front() == 16);
  CHECK(first.units.front().kind == unit_kind::embedding);
  CHECK(first.units.front().numel == 16000LL * 4096);
  CHECK(first.units.back().kind == unit_kind::expert);
  CHECK(last.units.front().kind == unit_kind::dense);
  CHECK(last.units.back().kind == unit_kind::head);
  // Dense: q and o halves (2048 x 4096), k and v halves (512 x 4096), two norms, the router.
  CHECK(first.units[1].numel == 2 * 2048LL * 4096 + 2 * 512LL * 4096 + 8192 + 8 * 4096);
  // Experts: 2 whole experts (ETP 1).
  CHECK(first.units[2].numel == 2 * 3LL * 4096 * 14336);
  CHECK(last.units.back().numel == 4096 + 16000LL * 4096);
  CHECK(first.numel() == 16000LL * 4096 + 16 * (21'012'480LL + 352'321'536));
}

TEST_CASE("tied embeddings put a copy of the embedding on the last stage when PP > 1",
          "[model_params]") {
  const model_params p = make_model_params(qwen3_0_6b());
  const stage_slice single = slice_stage(p, make_layout(1, 1, 8, 1, 1, 1, 8), 0);
  CHECK(single.units.back().kind == unit_kind::head);
  CHECK(single.units.back().numel == 1024);  // model.norm only; the embedding serves as head
  const layout two = make_layout(1, 1, 4, 2, 1, 1, 4);
  const stage_slice last = slice_stage(p, two, 1);
  CHECK(last.units.back().numel == 1024 + 151936LL * 1024);
  CHECK(slice_stage(p, two, 0).units.front().numel == 151936LL * 1024);
  // A dense model has only dense units between the embedding and the head.
  CHECK(std::none_of(last.units.begin(), last.units.end(),
                     [](const shard_unit& u) { return u.kind == unit_kind::expert; }));
}

TEST_CASE("a unit's shard is padded up to a multiple of its shard ranks", "[model_params]") {
  const shard_unit u{unit_kind::dense, 0, 1001, 8};
  CHECK(u.shard_numel() == 126);  // ceil(1001 / 8): the flat buffer holds 1008 elements
  const shard_unit even{unit_kind::dense, 0, 1000, 8};
  CHECK(even.shard_numel() == 125);
}
