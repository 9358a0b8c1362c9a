// Tests of the whole plan (launcher/plan/job_plan.hpp) and of the changes it proposes when a
// plan does not fit (launcher/plan/fit_advice.hpp).
#include <catch2/catch.hpp>

#include <algorithm>

#include "common/job_config.hpp"
#include "launcher/plan/job_plan.hpp"
#include "tests/support/expect_error.hpp"

namespace plan = muster::launcher::plan;

namespace {

const std::string kConfigs = std::string(MUSTER_SOURCE_DIR) + "/etc/examples/hf-configs/";

plan::job_plan make(std::vector<std::string> overrides, int world, int gpus_per_node = 8,
                    std::int64_t gpu_memory = 80LL << 30) {
  auto loaded = muster::load_job_config("", overrides);
  plan::plan_request request;
  request.world = plan::world_size{world, "--world"};
  request.gpus_per_node = gpus_per_node;
  request.memory.gpu_memory_bytes = gpu_memory;
  return plan::make_plan(loaded.config, loaded.where, request);
}

std::string plan_error(std::vector<std::string> overrides, int world) {
  return muster::test::expect_error(muster::errc::config, [&] { make(overrides, world); });
}

// Qwen3-30B-A3B at 4096 tokens, the job most of these tests plan.
std::vector<std::string> qwen3(std::vector<std::string> more = {}) {
  std::vector<std::string> o = {"model.config_json=" + kConfigs + "qwen3-30b-a3b.json",
                                "train.seq_length=4096"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

}  // namespace

TEST_CASE("the AReaL folding example on 32 GPUs plans with Megatron's groups", "[job_plan]") {
  auto p = make(qwen3({"parallel.allocation=megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
                       "parallel.sequence_parallel=true"}),
                32);
  CHECK((p.layout.dp() == 4 && p.layout.edp() == 2 && p.layout.etp() == 4));
  // Rank 0's expert tensor-and-expert group: ETP 4 x EP 2 = the 8 ranks of stage 0's first
  // half; the pipeline pairs rank 0 with rank 16.
  auto etp_ep = p.groups.group_of(plan::group_kind::etp_ep, 0);
  CHECK(std::vector<int>(etp_ep.begin(), etp_ep.end()) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  auto pp = p.groups.group_of(plan::group_kind::pp, 0);
  CHECK(std::vector<int>(pp.begin(), pp.end()) == std::vector<int>{0, 16});
  CHECK(p.batch.global_batch_size == 4);  // micro 1 x accum 1 x dp 4
  CHECK(p.warnings.empty() == false);     // 1 micro-batch per step over 2 pipeline stages
}

TEST_CASE("the AReaL folding example on 16 GPUs plans", "[job_plan]") {
  auto p = make(qwen3({"parallel.allocation=megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)",
                       "parallel.sequence_parallel=true", "train.grad_accum_steps=8"}),
                16);
  CHECK((p.layout.dp() == 1 && p.layout.pp() == 4 && p.layout.ep() == 4 && p.layout.edp() == 1));
  CHECK(p.memory.stages.size() == 4);
  CHECK(p.warnings.empty());  // 8 micro-batches over 4 stages
}

TEST_CASE("LLaMA-Factory's global batch is shown beside Megatron's when EP > 1", "[job_plan]") {
  auto p = make(qwen3({"parallel.expert=8", "parallel.expert_tensor=1",
                       "train.micro_batch_size=2", "train.grad_accum_steps=4"}),
                16);
  CHECK(p.batch.global_batch_size == 2 * 4 * 16);  // DP 16: EP does not reduce it
  CHECK(p.batch.llamafactory_global_batch_size == 2 * 4 * 2);  // 16 // 8 = 2
  REQUIRE(p.notes.size() >= 1);
  CHECK_THAT(p.notes.front(), Catch::Contains("(16 // 1 // 1 // 8 // 1) * 2 * 4 = 16"));
  auto dense_ep1 = make(qwen3({"train.grad_accum_steps=4"}), 16);
  CHECK(dense_ep1.notes.empty());
}

TEST_CASE("every rule a plan breaks is reported at once", "[job_plan]") {
  auto message = plan_error(qwen3({"parallel.tensor=3", "parallel.pipeline=5", "parallel.expert=3",
                                   "parallel.expert_tensor=1", "parallel.sequence_parallel=true",
                                   "train.global_batch_size=7"}),
                            15 * 3);
  CHECK_THAT(message, Catch::Contains("the plan has 5 problems"));
  CHECK_THAT(message, Catch::Contains("48 layers do not split into pipeline x virtual_pipeline = 5 "
                                      "x 1 = 5 equal chunks; use parallel.pipeline = 1 or 3, "
                                      "or parallel.first_stage_layers = 9 and "
                                      "parallel.last_stage_layers = 9 (10 on each other stage), "
                                      "or a model of 45 or 50 layers"));
  CHECK_THAT(message, Catch::Contains("parallel.expert: 3 does not divide the 128 experts"));
  CHECK_THAT(message, Catch::Contains("parallel.tensor: 3 does not divide the 32 attention heads "
                                      "and the 4 query groups"));
  CHECK_THAT(message, Catch::Contains("4096 tokens per context rank do not split over tensor "
                                      "parallel 3 under sequence parallelism"));
  CHECK_THAT(message, Catch::Contains("train.global_batch_size: 7 is not a multiple of "
                                      "micro_batch_size x data parallel = 1 x 3 = 3; use "
                                      "global_batch_size = 6 or 9"));
}

TEST_CASE("sizes that do not divide the world are listed with the model's broken rules",
          "[job_plan]") {
  // world 16 over tensor 3 x pipeline 5: the world's rule, and beside it the model's, which
  // do not wait for the world to be fixed first; the batch (which needs the data-parallel size)
  // waits
  auto message = plan_error(qwen3({"parallel.tensor=3", "parallel.pipeline=5",
                                   "parallel.expert_tensor=1", "train.global_batch_size=7"}),
                            16);
  CHECK_THAT(message, Catch::Contains("the plan has 4 problems"));
  CHECK_THAT(message, Catch::Contains("the world of 16 ranks (--world) is not divisible by tensor "
                                      "x context x pipeline = 3 x 1 x 5 = 15"));
  // each proposing values that split the model and divide the world: none breaks another rule
  CHECK_THAT(message,
             Catch::Contains("48 layers do not split into pipeline x virtual_pipeline = 5 "
                             "x 1 = 5 equal chunks; use parallel.pipeline = 1, 2, 4 or 8"));
  // the world's own: no single pipeline or tensor size fits both (tensor 3 splits no head)
  CHECK_THAT(message, Catch::Contains("= 15; use a world of 15 or 30 ranks\n"));
  CHECK_THAT(message, Catch::Contains("parallel.tensor: 3 does not divide the 32 attention heads "
                                      "and the 4 query groups (model.num_attention_heads, "
                                      "model.num_query_groups); try tensor = 1, 2 or 4"));
  CHECK_THAT(message, Catch::Contains("needs sequence parallelism"));
  CHECK_THAT(message, !Catch::Contains("global_batch_size"));
  // the world's rule comes first
  CHECK(message.find("not divisible by tensor") < message.find("48 layers"));
  // the expert mesh the same way: pipeline 8 on a world of 8 with expert 2 breaks it alone (48
  // layers split into 8 stages); with pipeline 7 the layers' rule comes with it
  CHECK_THAT(
      plan_error(qwen3({"parallel.pipeline=8", "parallel.expert=2", "parallel.expert_tensor=1"}),
                 8),
      Catch::Contains("does not fit the expert mesh") && !Catch::Contains("problems"));
  // sizes far past the world still propose values
  CHECK_THAT(plan_error(qwen3({"parallel.tensor=3", "parallel.pipeline=8"}), 4),
             Catch::Contains("try tensor = 1, 2 or 4") && !Catch::Contains("= \n") &&
                 !Catch::EndsWith("= "));
  CHECK_THAT(
      plan_error(qwen3({"parallel.pipeline=7", "parallel.expert=2", "parallel.expert_tensor=1"}),
                 7),
      Catch::Contains("the plan has 2 problems") &&
          Catch::Contains("does not fit the expert mesh") &&
          Catch::Contains("48 layers do not split into pipeline x virtual_pipeline = 7"));
  // a world's message proposes only sizes the model splits over (world 6, tensor 4: 3 and 6
  // divide the world but not the 32 heads)
  CHECK_THAT(
      plan_error(qwen3({"parallel.tensor=4", "parallel.sequence_parallel=true",
                        "parallel.expert_tensor=1"}),
                 6),
      Catch::Contains("or parallel.tensor = 1 or 2") && !Catch::Contains("tensor = 1, 2, 3"));
}

TEST_CASE("model rules each propose values that work", "[job_plan]") {
  CHECK_THAT(plan_error(qwen3({"parallel.context=3"}), 24),
             Catch::Contains("4096 tokens do not split into 2 x context = 6 load-balanced "
                             "chunks; use train.seq_length = 4092 or 4098"));
  CHECK_THAT(plan_error(qwen3({"parallel.tensor=2"}), 8),
             Catch::Contains("a MoE model with tensor parallelism (2) needs sequence "
                             "parallelism, as Megatron-LM requires; set "
                             "parallel.sequence_parallel = true"));
  CHECK_THAT(plan_error({"model.num_experts=0", "parallel.expert=2"}, 4),
             Catch::Contains("parallel.expert: 2 on a dense model"));
  CHECK_THAT(plan_error({"parallel.expert_tensor=3", "model.moe_ffn_hidden_size=256"}, 3),
             Catch::Contains("model.moe_ffn_hidden_size: 256 does not split over expert tensor "
                             "parallel 3"));
  CHECK_THAT(plan_error(qwen3({"train.grad_accum_steps=3", "train.global_batch_size=16"}), 4),
             Catch::Contains("train.grad_accum_steps: 3 disagrees with global_batch_size 16"));
  CHECK_THAT(plan_error(qwen3({"parallel.pipeline=2", "parallel.expert=2", "parallel.order=tp-pp-ep-dp-cp"}), 4),
             Catch::Contains("parallel.order"));
}

TEST_CASE("a tensor-parallel group wider than a node is warned about", "[job_plan]") {
  auto p = make({"model.config_json=" + kConfigs + "mixtral-8x7b.json", "parallel.tensor=8",
                 "parallel.sequence_parallel=true"},
                16, 4);
  REQUIRE_FALSE(p.warnings.empty());
  CHECK_THAT(p.warnings.front(), Catch::Contains("2 of 2 tensor-parallel groups span nodes "
                                                 "(tensor = 8, 4 GPUs per node): TP traffic "
                                                 "leaves NVLink every layer; use a tensor size "
                                                 "that divides 4 (1, 2 or 4)"));
  // EP = 1: no all-to-all, so no note about it crossing nodes.
  CHECK(std::none_of(p.notes.begin(), p.notes.end(), [](const std::string& n) {
    return n.find("all-to-all") != std::string::npos;
  }));
}

TEST_CASE("a plan that fits proposes nothing, one that does not ranks the guides' changes",
          "[job_plan]") {
  auto fits = make(qwen3({"parallel.expert=8", "parallel.expert_tensor=1"}), 16);
  CHECK(fits.fits());
  CHECK(fits.fixes.empty());

  auto over = make(qwen3({"parallel.expert=8", "parallel.expert_tensor=1",
                          "train.micro_batch_size=2"}),
                   16);
  REQUIRE_FALSE(over.fits());
  REQUIRE(over.fixes.size() >= 2);
  // In the guides' order: micro batch first, then recompute; each smaller than the plan.
  CHECK_THAT(over.fixes[0].what, Catch::StartsWith("smaller micro batch"));
  CHECK(over.fixes[0].overrides ==
        std::vector<std::string>{"train.micro_batch_size=1", "train.grad_accum_steps=2"});
  CHECK(over.fixes[0].fits);
  CHECK(over.fixes[1].what == "activation recompute");
  for (const auto& fix : over.fixes) CHECK(fix.total_bytes < over.memory.total_bytes());

  // The proposed overrides, applied, give the estimate the fix promised.
  auto applied = qwen3({"parallel.expert=8", "parallel.expert_tensor=1",
                        "train.micro_batch_size=2"});
  applied.insert(applied.end(), over.fixes[0].overrides.begin(), over.fixes[0].overrides.end());
  auto after = make(applied, 16);
  CHECK(after.memory.total_bytes() == over.fixes[0].total_bytes);
  CHECK(after.batch.global_batch_size == over.batch.global_batch_size);
}

TEST_CASE("when no single change fits, a combination in the guides' order is proposed",
          "[job_plan]") {
  // Qwen3-30B-A3B on 8 GPUs with 24 GiB each: nothing alone is enough.
  auto p = make(qwen3({"parallel.sharding=no_shard", "train.micro_batch_size=2",
                       "train.grad_accum_steps=2"}),
                8, 8, 24LL << 30);
  REQUIRE_FALSE(p.fits());
  REQUIRE_FALSE(p.fixes.empty());
  for (std::size_t i = 0; i + 1 < p.fixes.size(); ++i) CHECK_FALSE(p.fixes[i].fits);
  const auto& together = p.fixes.back();
  CHECK_THAT(together.what, Catch::StartsWith("together: smaller micro batch + activation "
                                              "recompute + stronger sharding"));
  CHECK(together.total_bytes < p.fixes.front().total_bytes);
}

TEST_CASE("layout changes keep the world, the global batch and the allocation syntax",
          "[job_plan]") {
  auto p = make(qwen3({"parallel.allocation=megatron:d16", "train.micro_batch_size=4",
                       "train.recompute=full", "train.grad_accum_steps=2"}),
                16, 8, 40LL << 30);
  REQUIRE_FALSE(p.fits());
  auto cp = std::find_if(p.fixes.begin(), p.fixes.end(), [](const plan::fit_change& f) {
    return f.what == "more context parallelism";
  });
  REQUIRE(cp != p.fixes.end());
  // The mildest CP that fits, else the one that saves most (here CP 8: DP 2, and 16
  // micro-batches of 4 keep the 128 rows).
  CHECK(cp->overrides ==
        std::vector<std::string>{"parallel.allocation=megatron:d2c8", "train.grad_accum_steps=16"});
  auto applied = qwen3({"parallel.allocation=megatron:d16", "train.micro_batch_size=4",
                        "train.recompute=full", "train.grad_accum_steps=2"});
  applied.insert(applied.end(), cp->overrides.begin(), cp->overrides.end());
  auto after = make(applied, 16, 8, 40LL << 30);
  CHECK(after.fits() == cp->fits);
  CHECK(after.batch.global_batch_size == p.batch.global_batch_size);
  CHECK(after.memory.total_bytes() == cp->total_bytes);
}

TEST_CASE("a plan that fits with almost no room is warned about", "[job_plan]") {
  auto roomy = make(qwen3({"parallel.expert=8", "parallel.expert_tensor=1"}), 16);
  REQUIRE(roomy.fits());
  const auto total = roomy.memory.total_bytes();
  auto tight = make(qwen3({"parallel.expert=8", "parallel.expert_tensor=1"}), 16, 8,
                    total + total / 100);
  CHECK(tight.fits());
  REQUIRE_FALSE(tight.warnings.empty());
  CHECK_THAT(tight.warnings.back(), Catch::Contains("it fits with only 1.0% of the GPU to spare"));
  CHECK(roomy.warnings.empty());
  // the list below the warning: changes that each make room, in the guides' order
  REQUIRE_FALSE(tight.fixes.empty());
  for (const auto& f : tight.fixes) {
    INFO(f.what);
    CHECK(f.fits);  // it fit before: each change still does, with more room
    CHECK(f.total_bytes < tight.memory.total_bytes());
    std::vector<std::string> changed = {"parallel.expert=8", "parallel.expert_tensor=1"};
    changed.insert(changed.end(), f.overrides.begin(), f.overrides.end());
    const auto after = make(qwen3(changed), 16, 8, total + total / 100);
    CHECK(after.memory.total_bytes() == f.total_bytes);
    CHECK(f.roomy == !plan::tight_fit(after.memory));
  }
  CHECK(roomy.fixes.empty());
}

TEST_CASE("the plan's FLOPs and parameters come from the model inventory", "[job_plan]") {
  auto p = make(qwen3(), 8);
  CHECK(p.params.total == 30'532'122'624LL);
  CHECK(p.flops_per_token == plan::train_flops_per_token(p.params, p.config.model, 4096));
}

TEST_CASE("DeepSeek-V3's 61 layers plan on 16 stages with uneven first and last stages",
          "[job_plan]") {
  std::vector<std::string> v3 = {"model.config_json=" + kConfigs + "deepseek-v3.json",
                                 "parallel.pipeline=16", "parallel.expert=64",
                                 "parallel.expert_tensor=1", "train.seq_length=4096",
                                 "train.recompute=full", "parallel.sharding=optim",
                                 "train.global_batch_size=1024"};
  CHECK_THAT(plan_error(v3, 1024),
             Catch::Contains("61 layers do not split into pipeline x virtual_pipeline = 16 x 1 = "
                             "16 equal chunks; use parallel.pipeline = 1, or "
                             "parallel.first_stage_layers = 3 and parallel.last_stage_layers = 2 "
                             "(4 on each other stage), or a model of 48 or 64 layers"));
  v3.push_back("parallel.first_stage_layers=3");
  v3.push_back("parallel.last_stage_layers=2");
  auto p = make(v3, 1024);
  // By hand: MLA per layer q_a 7168*1536 + q_a_layernorm 1536 + q_b 1536*128*(128+64)
  // + kv_a 7168*(512+64) + kv_a_layernorm 512 + kv_b 512*128*(128+128) + o 128*128*7168
  // + two norms 2*7168 = 187,121,664; 3 dense MLPs of 3*7168*18432; 58 MoE layers of router
  // 256*7168 + 256 experts of 3*7168*2048 + a shared expert of 3*7168*2048; embedding and head
  // 2*129280*7168; final norm 7168.
  const std::int64_t attention = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 +
                                 512LL * 128 * 256 + 128LL * 128 * 7168 + 2 * 7168;
  CHECK(attention == 187'121'664);
  const std::int64_t moe = 256LL * 7168 + 256LL * 3 * 7168 * 2048 + 3LL * 7168 * 2048;
  CHECK(p.params.total == 61 * attention + 3 * (3LL * 7168 * 18432) + 58 * moe +
                              2LL * 129280 * 7168 + 7168);
  CHECK(p.params.total == 671'026'404'352LL);  // the published 671B
  int layers = 0;
  for (int stage = 0; stage < 16; ++stage) {
    auto own = plan::stage_layers(61, p.layout, stage);
    CHECK(own.size() == (stage == 0 ? 3u : stage == 15 ? 2u : 4u));
    CHECK(own.front() == layers);  // consecutive, in order
    layers += static_cast<int>(own.size());
  }
  CHECK(layers == 61);
  // Stage 0 holds the three dense layers: the least expert state of all stages.
  CHECK(p.memory.stages[0].optimizer_bytes < p.memory.stages[1].optimizer_bytes);
}

TEST_CASE("an uneven pipeline that does not add up says how it would", "[job_plan]") {
  CHECK_THAT(plan_error({"parallel.pipeline=4", "parallel.first_stage_layers=2",
                         "model.num_layers=9"},
                        4),
             Catch::Contains("parallel.first_stage_layers: first 2 + last 0 layers leave 7 of the "
                             "9 layers for the 3 other pipeline stages, which is not a whole "
                             "number (of at least 1) each; use parallel.first_stage_layers = 2 "
                             "and parallel.last_stage_layers = 1 (3 on each other stage)"));
  CHECK_THAT(plan_error({"parallel.first_stage_layers=2"}, 2),
             Catch::Contains("an uneven pipeline needs pipeline >= 2 and virtual_pipeline = 1"));
  auto two = make({"parallel.pipeline=2", "parallel.first_stage_layers=1",
                   "parallel.last_stage_layers=3"},
                  2);
  CHECK(plan::stage_layers(4, two.layout, 1) == std::vector<int>{1, 2, 3});
}

TEST_CASE("the comparison tables hold the plan's own estimate in their row", "[job_plan]") {
  auto p = make(qwen3({"parallel.expert=8", "parallel.expert_tensor=1"}), 16);
  REQUIRE(p.by_sharding.size() == 4);
  REQUIRE(p.by_recompute.size() == 3);
  REQUIRE(p.by_precision.size() == 3);
  CHECK(p.by_sharding[3].setting == "parallel.sharding=optim_grads_params");
  CHECK(p.by_sharding[3].worst.total_bytes() == p.memory.total_bytes());
  CHECK(p.by_recompute[0].worst.total_bytes() == p.memory.total_bytes());
  for (std::size_t i = 1; i < 3; ++i)
    CHECK(p.by_recompute[i].worst.activations_bytes < p.by_recompute[i - 1].worst.activations_bytes);
  auto state = [](const plan::stage_memory& m) {
    return m.params_bytes + m.grads_bytes + m.optimizer_bytes;
  };
  for (std::size_t i = 1; i < 4; ++i)
    CHECK(state(p.by_sharding[i].worst) < state(p.by_sharding[i - 1].worst));
  CHECK(p.by_precision[1].worst.grads_bytes * 2 == p.by_precision[0].worst.grads_bytes);
}
