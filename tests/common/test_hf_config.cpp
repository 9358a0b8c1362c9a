// Tests of reading Hugging Face config.json files into the model section (common/hf_config.hpp),
// on the published configs of Mixtral-8x7B, Qwen3-30B-A3B, Qwen1.5-MoE-A2.7B, DeepSeek-V2-Lite
// and DeepSeek-V3 (etc/examples/hf-configs/).
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "common/hf_config.hpp"
#include "common/job_config.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::filesystem::path kConfigs =
    std::filesystem::path(MUSTER_SOURCE_DIR) / "etc/examples/hf-configs";

muster::model_section read(const std::string& name, muster::config::sources* where = nullptr) {
  muster::model_section model;
  muster::config::sources local;
  muster::apply_hf_config(kConfigs / name, model, where ? *where : local);
  return model;
}

std::string hf_error(const std::string& json) {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "config.json", json);
  return muster::test::expect_error(muster::errc::config, [&] {
    muster::model_section model;
    muster::config::sources where;
    muster::apply_hf_config(dir / "config.json", model, where);
  });
}

}  // namespace

TEST_CASE("a Qwen3-MoE config gives head_dim, q/k norms and 128 routed experts", "[hf_config]") {
  muster::config::sources where;
  auto m = read("qwen3-30b-a3b.json", &where);
  CHECK(m.num_layers == 48);
  CHECK(m.hidden_size == 2048);
  CHECK(m.ffn_hidden_size == 6144);
  CHECK(m.num_attention_heads == 32);
  CHECK(m.num_query_groups == 4);
  CHECK(m.head_dim == 128);
  CHECK(m.vocab_size == 151936);
  CHECK(m.qk_norm);
  CHECK_FALSE(m.attention_bias);
  CHECK_FALSE(m.tie_embeddings);
  CHECK(m.num_experts == 128);
  CHECK(m.moe_ffn_hidden_size == 768);
  CHECK(m.moe_router_topk == 8);
  CHECK(m.moe_shared_expert_ffn_hidden_size == 0);
  CHECK((m.moe_first_dense_layers == 0 && m.moe_layer_freq == 1));
  CHECK(m.moe_router_score == "softmax");
  CHECK_THAT(where.at("model.num_query_groups"),
             Catch::EndsWith("qwen3-30b-a3b.json: num_key_value_heads"));
}

TEST_CASE("a Mixtral config reads intermediate_size as the expert size", "[hf_config]") {
  auto m = read("mixtral-8x7b.json");
  CHECK(m.num_experts == 8);
  CHECK(m.moe_ffn_hidden_size == 14336);
  CHECK(m.moe_router_topk == 2);
  CHECK(m.head_dim == 0);  // hidden / heads = 128
  CHECK_FALSE(m.qk_norm);  // the job file's default is true; Mixtral has no q/k norms
  CHECK(m.num_query_groups == 8);
}

TEST_CASE("a Qwen2-MoE config gives the shared expert, its gate and q/k/v biases", "[hf_config]") {
  auto m = read("qwen1.5-moe-a2.7b.json");
  CHECK(m.num_experts == 60);
  CHECK(m.moe_ffn_hidden_size == 1408);
  CHECK(m.moe_shared_expert_ffn_hidden_size == 5632);
  CHECK(m.moe_shared_expert_gate);
  CHECK(m.attention_bias);
  CHECK_FALSE(m.qk_norm);
}

TEST_CASE("DeepSeek configs give multi-latent attention and leading dense layers", "[hf_config]") {
  auto v3 = read("deepseek-v3.json");
  CHECK((v3.q_lora_rank == 1536 && v3.kv_lora_rank == 512));
  CHECK((v3.head_dim == 128 && v3.qk_rope_head_dim == 64 && v3.v_head_dim == 128));
  CHECK(v3.num_experts == 256);
  CHECK(v3.moe_shared_expert_ffn_hidden_size == 2048);  // 1 shared expert x 2048
  CHECK(v3.moe_first_dense_layers == 3);
  CHECK(v3.ffn_hidden_size == 18432);
  CHECK(v3.moe_router_score == "sigmoid");
  auto lite = read("deepseek-v2-lite.json");
  CHECK(lite.q_lora_rank == 0);  // null: a full-rank query projection
  CHECK(lite.moe_shared_expert_ffn_hidden_size == 2 * 1408);
  CHECK(lite.moe_router_score == "softmax");
}

TEST_CASE("keys set in the job file or on the command line win over config.json", "[hf_config]") {
  muster::test::temp_dir dir;
  std::filesystem::create_directories(dir / "models");
  std::filesystem::copy_file(kConfigs / "qwen3-30b-a3b.json", dir / "models/config.json");
  muster::test::write_file(dir / "job.toml",
                           "[model]\nconfig_json = \"models/config.json\"\nnum_layers = 2\n");
  std::vector<std::string> overrides = {"model.num_experts=16"};
  auto loaded = muster::load_job_config(dir / "job.toml", overrides);
  CHECK(loaded.config.model.num_layers == 2);    // job file
  CHECK(loaded.config.model.num_experts == 16);  // command line
  CHECK(loaded.config.model.hidden_size == 2048);  // config.json, read beside the job file
  CHECK_THAT(loaded.where.at("model.hidden_size"), Catch::Contains("config.json: hidden_size"));
  // the run directory's copy, which the ranks read, finds the same file from elsewhere
  CHECK(std::filesystem::path(loaded.config.model.config_json) ==
        std::filesystem::absolute(dir / "models/config.json").lexically_normal());
  std::filesystem::create_directories(dir / "runs/r1");
  muster::test::write_file(dir / "runs/r1/job.toml", muster::to_toml(loaded.config, true));
  const auto copy = muster::load_job_config(dir / "runs/r1/job.toml", {});
  CHECK(copy.config.model.hidden_size == 2048);
  CHECK(copy.config.model.num_experts == 16);
}

TEST_CASE("a config.json value that breaks a rule is named by its field", "[hf_config]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "config.json",
                           R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                               "num_attention_heads": 8, "num_key_value_heads": 3,
                               "vocab_size": 100, "intermediate_size": 128})");
  std::vector<std::string> overrides = {"model.config_json=" + (dir / "config.json").string()};
  auto message = muster::test::expect_error(muster::errc::config,
                                            [&] { muster::load_job_config("", overrides); });
  CHECK_THAT(message, Catch::Contains("config.json: num_key_value_heads: model.num_query_groups: "
                                      "3 does not divide the 8 attention heads"));
}

TEST_CASE("config.json mistakes name the file and the field", "[hf_config]") {
  CHECK_THAT(hf_error("{\"model_type\": "), Catch::Contains("not valid JSON at byte"));
  CHECK_THAT(hf_error("[]"), Catch::Contains("expected a JSON object"));
  CHECK_THAT(hf_error(R"({"model_type": "gpt2"})"),
             Catch::Contains("model_type: \"gpt2\" is not one muster reads (mixtral, qwen2_moe"));
  CHECK_THAT(hf_error(R"({"hidden_size": 4})"), Catch::Contains("model_type: missing"));
  CHECK_THAT(hf_error(R"({"model_type": "mixtral", "hidden_size": 64})"),
             Catch::Contains("num_hidden_layers: missing"));
  CHECK_THAT(hf_error(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": "big"})"),
             Catch::Contains("hidden_size: expected an integer, found \"big\""));
  CHECK_THAT(hf_error(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 4,
                          "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8,
                          "moe_intermediate_size": 8, "num_experts": 4,
                          "num_experts_per_tok": 2, "mlp_only_layers": [1, 3]})"),
             Catch::Contains("mlp_only_layers: [1,3] with decoder_sparse_step 1: muster "
                             "represents only a leading run"));
  auto missing = muster::test::expect_error(muster::errc::config, [] {
    muster::model_section model;
    muster::config::sources where;
    muster::apply_hf_config("/nonexistent/config.json", model, where);
  });
  CHECK_THAT(missing, Catch::Contains("/nonexistent/config.json: cannot read"));
}

TEST_CASE("Qwen's decoder_sparse_step becomes leading dense layers and a frequency",
          "[hf_config]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "config.json",
                           R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 6,
                               "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8,
                               "moe_intermediate_size": 8, "num_experts": 4,
                               "num_experts_per_tok": 2, "decoder_sparse_step": 2})");
  muster::model_section m;
  muster::config::sources where;
  muster::apply_hf_config(dir / "config.json", m, where);
  // HF Qwen2-MoE: layer i is MoE when (i + 1) % 2 == 0, i.e. layers 1, 3, 5.
  CHECK(m.moe_first_dense_layers == 1);
  CHECK(m.moe_layer_freq == 2);
}

TEST_CASE("a job file started from the example does not hide config.json behind its defaults",
          "[hf_config]") {
  muster::test::temp_dir dir;
  std::filesystem::copy_file(kConfigs / "mixtral-8x7b.json", dir / "config.json");
  std::ifstream example(std::filesystem::path(MUSTER_SOURCE_DIR) / "etc/examples/job.toml");
  std::string text((std::istreambuf_iterator<char>(example)), std::istreambuf_iterator<char>());
  auto replace = [&](const std::string& from, const std::string& to) {
    auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  replace("config_json = \"\"", "config_json = \"config.json\"");
  replace("num_layers = 4", "num_layers = 2");  // changed from the default: it wins
  muster::test::write_file(dir / "job.toml", text);
  std::vector<std::string> overrides = {"model.qk_norm=true"};  // the default, but explicit
  auto loaded = muster::load_job_config(dir / "job.toml", overrides);
  CHECK(loaded.config.model.hidden_size == 4096);  // from config.json, not the example's 256
  CHECK(loaded.config.model.num_experts == 8);
  CHECK(loaded.config.model.moe_ffn_hidden_size == 14336);
  CHECK(loaded.config.model.num_layers == 2);
  CHECK(loaded.config.model.qk_norm);  // the command line wins even with a default value
}

TEST_CASE("rotary base, norm epsilon, top-k normalisation and aux-loss weight come along",
          "[hf_config]") {
  auto qwen3 = read("qwen3-30b-a3b.json");
  CHECK(qwen3.rope_theta == 1e6);
  CHECK(qwen3.norm_eps == 1e-6);
  CHECK(qwen3.moe_router_topk_norm);
  CHECK(qwen3.moe_aux_loss_coeff == 0.001);
  auto qwen15 = read("qwen1.5-moe-a2.7b.json");
  CHECK_FALSE(qwen15.moe_router_topk_norm);
  auto mixtral = read("mixtral-8x7b.json");  // no norm_topk_prob: Mixtral always normalises
  CHECK(mixtral.moe_router_topk_norm);
  CHECK(mixtral.norm_eps == 1e-5);
  CHECK(mixtral.moe_aux_loss_coeff == 0.02);
  auto lite = read("deepseek-v2-lite.json");
  CHECK_FALSE(lite.moe_router_topk_norm);
  CHECK(lite.moe_aux_loss_coeff == 0.001);  // DeepSeek's aux_loss_alpha
  CHECK(lite.rope_theta == 10000);
  CHECK(read("deepseek-v3.json").moe_router_topk_norm);
  CHECK_THAT(hf_error(R"({"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8,
      "moe_intermediate_size": 8, "num_experts": 4, "num_experts_per_tok": 2,
      "rope_theta": "big"})"),
             Catch::Contains("rope_theta: expected a number, found \"big\""));
}
