// Tests of resolving the parallel layout (launcher/plan/layout_resolve.hpp).
#include <catch2/catch.hpp>

#include "common/job_config.hpp"
#include "launcher/plan/layout_resolve.hpp"
#include "tests/support/expect_error.hpp"

namespace plan = muster::launcher::plan;

namespace {

plan::layout resolve(const std::vector<std::string>& overrides, std::optional<int> world) {
  auto loaded = muster::load_job_config("", overrides);
  std::optional<plan::world_size> w;
  if (world) w = plan::world_size{*world, "--world"};
  return plan::resolve_layout(loaded.config.parallel, w, loaded.where);
}

std::string resolve_error(const std::vector<std::string>& overrides, std::optional<int> world) {
  return muster::test::expect_error(muster::errc::config, [&] { resolve(overrides, world); });
}

}  // namespace

TEST_CASE("attention DP is world over TP x CP x PP and EP does not reduce it", "[layout]") {
  auto l = resolve({"parallel.tensor=2", "parallel.pipeline=2", "parallel.expert=2"}, 8);
  CHECK(l.world == 8);
  CHECK((l.tp() == 2 && l.pp() == 2 && l.cp() == 1 && l.dp() == 2));
  // Megatron's default ETP is TP: expert mesh 2 x 2 x EDP x 2 = 8 -> EDP 1.
  CHECK((l.etp() == 2 && l.ep() == 2 && l.edp() == 1));
  auto m = resolve({"parallel.expert=4", "parallel.expert_tensor=1"}, 16);
  CHECK((m.dp() == 16 && m.ep() == 4 && m.edp() == 4 && m.etp() == 1));
}

TEST_CASE("the AReaL folding examples resolve as AReaL documents them", "[layout]") {
  // megatron:(attn:d4p2t2c2|ffn:d2p2t4e2) on 32 GPUs.
  auto a = resolve({"parallel.allocation=megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)"}, 32);
  CHECK((a.dp() == 4 && a.pp() == 2 && a.tp() == 2 && a.cp() == 2));
  CHECK((a.edp() == 2 && a.etp() == 4 && a.ep() == 2 && a.expert.pp == 2));
  // megatron:(attn:d1p4t2c2|ffn:d1p4t1e4) on 16 GPUs.
  auto b = resolve({"parallel.allocation=megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)"}, 16);
  CHECK((b.dp() == 1 && b.pp() == 4 && b.tp() == 2 && b.cp() == 2));
  CHECK((b.edp() == 1 && b.etp() == 1 && b.ep() == 4));
  // Without a world, the allocation's own product is the world.
  CHECK(resolve({"parallel.allocation=megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)"}, {}).world == 16);
}

TEST_CASE("a missing d is derived, in both halves", "[layout]") {
  auto l = resolve({"parallel.allocation=t2p2"}, 16);
  CHECK(l.dp() == 4);
  auto f = resolve({"parallel.allocation=megatron:(attn:t2p2|ffn:e4)"}, 16);
  CHECK((f.dp() == 4 && f.ep() == 4 && f.etp() == 1 && f.edp() == 2 && f.expert.pp == 2));
  // Unfolded e: experts are not tensor-parallel (AReaL), EP is carved from the 8 remaining.
  auto u = resolve({"parallel.allocation=megatron:d2p2t4e4"}, {});
  CHECK((u.world == 16 && u.dp() == 2 && u.etp() == 1 && u.ep() == 4 && u.edp() == 2));
}

TEST_CASE("layout errors name the numbers and propose values that work", "[layout]") {
  CHECK_THAT(resolve_error({"parallel.tensor=4", "parallel.pipeline=4"}, 24),
             Catch::Contains("the world of 24 ranks (--world) is not divisible by tensor x "
                             "context x pipeline = 4 x 1 x 4 = 16; use a world of 16 or 32 ranks, "
                             "or parallel.pipeline = 1, 2, 3 or 6"));
  CHECK_THAT(resolve_error({"parallel.expert=3", "parallel.expert_tensor=1"}, 8),
             Catch::Contains("parallel.expert = 3 does not fit the expert mesh: expert tensor x "
                             "expert x pipeline = 1 x 3 x 1 = 3 does not divide the world of 8 "
                             "ranks (--world); try parallel.expert = 1, 2, 4 or 8"));
  CHECK_THAT(resolve_error({"parallel.data=4", "parallel.tensor=2"}, 16),
             Catch::Contains("parallel.data = 4: tensor x context x data x pipeline = 2 x 1 x 4 "
                             "x 1 = 8 ranks, but the world has 16 (--world); use parallel.data = "
                             "8 or leave it out"));
  CHECK_THAT(resolve_error({"parallel.allocation=megatron:(attn:d2p2|ffn:p4e2)"}, {}),
             Catch::Contains("the attn half has p2 but the ffn half p4"));
  CHECK_THAT(resolve_error({"parallel.allocation=megatron:(attn:d2p2|ffn:d4e2)"}, {}),
             Catch::Contains("'d' in the ffn half is 4, but expert tensor x expert x pipeline = 1 "
                             "x 2 x 2 leaves 1 expert-data-parallel ranks of the 4; use d1"));
  CHECK_THAT(resolve_error({"parallel.allocation=d2", "parallel.tensor=2"}, {}),
             Catch::Contains("command line 'parallel.tensor=2': parallel.tensor = 2 and "
                             "parallel.allocation are both set"));
  // A size written at its default is no conflict.
  CHECK(resolve({"parallel.allocation=d2", "parallel.tensor=1"}, {}).world == 2);
  CHECK_THAT(resolve_error({"parallel.allocation=megatron:(attn:d2e2|ffn:e2)"}, {}),
             Catch::Contains("command line 'parallel.allocation=megatron:(attn:d2e2|ffn:e2)': "
                             "parallel.allocation: \"megatron:(attn:d2e2|ffn:e2)\": column 18: "
                             "'e' is allowed only in the ffn half"));
  CHECK_THAT(resolve_error({"parallel.tensor=2"}, {}),
             Catch::Contains("the world size is unknown: give --world N"));
  CHECK_THAT(resolve_error({"parallel.virtual_pipeline=2"}, 8),
             Catch::Contains("parallel.virtual_pipeline = 2 needs pipeline parallelism"));
}

TEST_CASE("layout errors blame the size that was set and are all reported", "[layout]") {
  CHECK_THAT(resolve_error({"parallel.pipeline=3"}, 16),
             Catch::StartsWith("command line 'parallel.pipeline=3': the world of 16 ranks"));
  // Of two sizes set, the one that cannot divide the world by itself.
  CHECK_THAT(resolve_error({"parallel.pipeline=2", "parallel.tensor=3"}, 8),
             Catch::StartsWith("command line 'parallel.tensor=3': the world of 8 ranks"));
  CHECK_THAT(resolve_error({"parallel.tensor=3"}, 16),
             Catch::Contains("use a world of 15 or 18 ranks, or parallel.tensor = 1, 2, 4 or 8"));
  CHECK_THAT(resolve_error({"parallel.expert_tensor=3"}, 8),
             Catch::Contains("command line 'parallel.expert_tensor=3': parallel.expert = 1 does "
                             "not fit the expert mesh: expert tensor x expert x pipeline = 3 x 1 "
                             "x 1 = 3 does not divide the world of 8 ranks (--world); try "
                             "parallel.expert_tensor = 1, 2, 4 or 8"));
  auto both = resolve_error({"parallel.virtual_pipeline=2", "parallel.expert=3",
                             "parallel.expert_tensor=1"},
                            16);
  CHECK_THAT(both, Catch::StartsWith("the plan has 2 problems"));
  CHECK_THAT(both, Catch::Contains("expert tensor x expert x pipeline = 1 x 3 x 1"));
  CHECK_THAT(both, Catch::Contains("parallel.virtual_pipeline = 2 needs pipeline parallelism"));
}
