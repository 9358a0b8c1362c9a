// Unit tests of launcher/plan/rank_groups: the groups Megatron-Core builds, written out as
// literal lists taken from (or derived by hand for) Megatron's own tests and docstrings in
// megatron/core/parallel_state.py and tests/unit_tests/test_parallel_state.py; a port of that
// test file's "golden_rank_result_from_past_code" (Megatron's loops before RankGenerator) run over
// its parameter list; AReaL's attention/FFN folding examples; coordinates against group
// membership; node placement; the order checks Megatron asserts; and a 16384-rank layout.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/plan/rank_groups.hpp"
#include "tests/support/expect_error.hpp"

using muster::errc;
using muster::launcher::plan::group_kind;
using muster::launcher::plan::kGroupKinds;
using muster::launcher::plan::layout;
using muster::launcher::plan::masked_orthogonal_groups;
using muster::launcher::plan::mesh;
using muster::launcher::plan::mesh_groups;
using muster::launcher::plan::pipeline_groups_mismatch;
using muster::launcher::plan::pp_last_order_mismatch;
using muster::launcher::plan::rank_coords;
using muster::launcher::plan::rank_groups;
using muster::test::expect_error;

namespace {

using group_list = std::vector<std::vector<int>>;

// A layout with attention mesh tp x cp x dp x pp and expert mesh etp x ep x edp x pp.
layout make_layout(int tp, int cp, int dp, int pp, int etp, int ep, int edp,
                   std::string order = "tp-cp-ep-dp-pp") {
  layout l;
  l.world = tp * cp * dp * pp;
  l.attn = mesh{tp, cp, 1, dp, pp};
  l.expert = mesh{etp, 1, ep, edp, pp};
  l.order = std::move(order);
  return l;
}

// Megatron's initialize_model_parallel on `world` ranks: dp = world / (tp*pp*cp), etp = tp
// (expert_tensor_parallel_size defaults to tp), edp = world / (tp*ep*pp).
layout megatron_layout(int world, int tp, int pp, int cp, int ep, std::string order) {
  return make_layout(tp, cp, world / (tp * pp * cp), pp, tp, ep, world / (tp * ep * pp),
                     std::move(order));
}

group_list to_list(std::span<const int> g) {
  return {std::vector<int>(g.begin(), g.end())};
}

// The first inconsistency between groups and coordinates, or "" when there is none: every rank
// is in exactly one group per kind at the position the lookups report; members of a group share
// every coordinate of their mesh except the grouped ones, and differ in those; coordinates
// identify ranks in each mesh; a one-dimension group's position is that coordinate.
std::string consistency_problem(const rank_groups& rg) {
  const int world = rg.world();
  std::set<std::array<int, 4>> attn_seen, expert_seen;
  for (int r = 0; r < world; ++r) {
    const rank_coords c = rg.coords(r);
    if (c.rank != r || c.node != rg.node_of(r) || c.local_rank != r % rg.gpus_per_node())
      return "rank/node/local_rank of rank " + std::to_string(r);
    attn_seen.insert({c.tp, c.cp, c.dp, c.pp});
    expert_seen.insert({c.etp, c.ep, c.edp, c.pp});
  }
  if (static_cast<int>(attn_seen.size()) != world) return "attention coordinates repeat";
  if (static_cast<int>(expert_seen.size()) != world) return "expert coordinates repeat";
  for (group_kind kind : kGroupKinds) {
    const std::string name(muster::launcher::plan::group_name(kind));
    // Which of the mesh's four coordinates (tp cp dp pp, or etp ep edp pp) the group spans.
    const bool expert = kind == group_kind::ep || kind == group_kind::etp ||
                        kind == group_kind::edp || kind == group_kind::etp_ep;
    std::array<bool, 4> grouped{};
    switch (kind) {
      case group_kind::tp:
      case group_kind::etp:
        grouped = {true, false, false, false};
        break;
      case group_kind::cp:
      case group_kind::ep:
        grouped = {false, true, false, false};
        break;
      case group_kind::dp:
      case group_kind::edp:
        grouped = {false, false, true, false};
        break;
      case group_kind::dp_cp:
      case group_kind::etp_ep:
        grouped = {kind == group_kind::etp_ep, true, kind == group_kind::dp_cp, false};
        break;
      case group_kind::pp:
        grouped = {false, false, false, true};
        break;
      case group_kind::mp:
        grouped = {true, false, false, true};
        break;
    }
    const auto split = [&](int r, std::array<int, 4>& kept, std::array<int, 4>& spanned) {
      const rank_coords c = rg.coords(r);
      const std::array<int, 4> all = expert ? std::array<int, 4>{c.etp, c.ep, c.edp, c.pp}
                                            : std::array<int, 4>{c.tp, c.cp, c.dp, c.pp};
      for (int i = 0; i < 4; ++i) (grouped[i] ? spanned : kept)[i] = all[i];
    };
    std::vector<int> times_seen(world, 0);
    const group_list& groups = rg.groups(kind);
    for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
      std::array<int, 4> kept0{}, unused{};
      split(groups[g][0], kept0, unused);
      std::set<std::array<int, 4>> spanned_seen;
      for (int j = 0; j < static_cast<int>(groups[g].size()); ++j) {
        const int r = groups[g][j];
        ++times_seen[r];
        if (rg.group_index(kind, r) != g || rg.rank_in_group(kind, r) != j ||
            rg.group_of(kind, r).data() != groups[g].data())
          return name + ": lookups of rank " + std::to_string(r);
        std::array<int, 4> kept{}, spanned{};
        split(r, kept, spanned);
        if (kept != kept0) return name + ": group " + std::to_string(g) + " mixes coordinates";
        spanned_seen.insert(spanned);
        const int only = grouped[0] + grouped[1] + grouped[2] + grouped[3] == 1
                             ? spanned[grouped[0]   ? 0
                                       : grouped[1] ? 1
                                       : grouped[2] ? 2
                                                    : 3]
                             : j;
        if (only != j)
          return name + ": position of rank " + std::to_string(r) + " is not its coordinate";
      }
      if (spanned_seen.size() != groups[g].size())
        return name + ": group " + std::to_string(g) + " repeats a coordinate";
    }
    for (int r = 0; r < world; ++r)
      if (times_seen[r] != 1)
        return name + ": rank " + std::to_string(r) + " not in exactly one group";
  }
  return "";
}

}  // namespace

TEST_CASE("masked orthogonal groups reproduce the examples of Megatron's docstring",
          "[rank_groups]") {
  // generate_masked_orthogonal_rank_groups docstring: parallel_size [tp, dp, pp] = [2, 3, 4],
  // mask [False, True, False]: dp_group[0] = [0, 2, 4], [1] = [1, 3, 5], ..., [7] = [19, 21, 23].
  const std::array<int, 3> sizes = {2, 3, 4};
  const std::array<bool, 3> dp_mask = {false, true, false};
  CHECK(masked_orthogonal_groups(24, sizes, dp_mask) == group_list{{0, 2, 4},
                                                                   {1, 3, 5},
                                                                   {6, 8, 10},
                                                                   {7, 9, 11},
                                                                   {12, 14, 16},
                                                                   {13, 15, 17},
                                                                   {18, 20, 22},
                                                                   {19, 21, 23}});
  // Same docstring: order tp-pp-dp, sizes 2-2-2, the dp groups are [[0, 4], [1, 5], [2, 6], [3,
  // 7]].
  const std::array<int, 3> two = {2, 2, 2};
  const std::array<bool, 3> last = {false, false, true};
  CHECK(masked_orthogonal_groups(8, two, last) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // Two masked dimensions: members enumerate the first masked dimension fastest.
  const std::array<bool, 3> outer = {true, false, true};
  CHECK(masked_orthogonal_groups(8, two, outer) == group_list{{0, 1, 4, 5}, {2, 3, 6, 7}});
  const std::array<bool, 3> none = {false, false, false};
  CHECK(masked_orthogonal_groups(8, two, none).size() == 8);
}

TEST_CASE("masked orthogonal groups reject sizes that do not describe the world", "[rank_groups]") {
  const std::array<int, 3> sizes = {2, 2, 2};
  const std::array<bool, 2> short_mask = {true, false};
  const std::array<bool, 3> mask = {true, false, false};
  const std::array<int, 3> zero = {2, 0, 2};
  CHECK_THAT(
      expect_error(errc::invalid_input, [&] { masked_orthogonal_groups(8, sizes, short_mask); }),
      Catch::Contains("3 dimension sizes but 2 mask entries"));
  CHECK_THAT(expect_error(errc::invalid_input, [&] { masked_orthogonal_groups(16, sizes, mask); }),
             Catch::Contains("multiply to 8 ranks, not the world of 16"));
  CHECK_THAT(expect_error(errc::invalid_input, [&] { masked_orthogonal_groups(0, zero, mask); }),
             Catch::Contains("size 0"));
}

TEST_CASE("the groups of Megatron's initialize_model_parallel docstring", "[rank_groups]") {
  // "16 GPUs ... 2 GPUs to parallelize the model tensor, and 4 GPUs to parallelize the model
  // pipeline": 8 data-parallel, 8 tensor and 4 pipeline groups, listed there.
  const rank_groups rg(megatron_layout(16, 2, 4, 1, 1, "tp-cp-ep-dp-pp"), 8);
  CHECK(rg.groups(group_kind::dp) ==
        group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(rg.groups(group_kind::tp) ==
        group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(rg.groups(group_kind::pp) ==
        group_list{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  // context_parallel_size docstring: 8 GPUs, TP 4, CP 2: [GPU0, GPU4], ..., [GPU3, GPU7].
  const rank_groups cp(megatron_layout(8, 4, 1, 2, 1, "tp-cp-ep-dp-pp"), 8);
  CHECK(cp.groups(group_kind::cp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("the default order and tp-cp-pp-ep-dp give Megatron's pipeline neighbours",
          "[rank_groups]") {
  // test_parallel_state.py runs its tests under both orders ('tp-cp-ep-dp-pp',
  // 'tp-cp-pp-ep-dp'); test_pipeline_parallel_initializations with TP 2, PP 4 on 8 ranks
  // expects first rank = rank % 2, next = (rank + 2) % 8, previous = (rank - 2) % 8.
  for (const char* order : {"tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp"}) {
    INFO("order " << order);
    const rank_groups rg(megatron_layout(8, 2, 4, 1, 1, order), 8);
    CHECK(rg.groups(group_kind::pp) == group_list{{0, 2, 4, 6}, {1, 3, 5, 7}});
    for (int r = 0; r < 8; ++r) {
      const auto g = rg.group_of(group_kind::pp, r);
      const int at = rg.rank_in_group(group_kind::pp, r);
      CHECK(g.front() == r % 2);
      CHECK(g[(at + 1) % 4] == (r + 2) % 8);
      CHECK(g[(at + 3) % 4] == (r + 6) % 8);
      CHECK(rg.coords(r).pp == r / 2);  // test_pipeline_model_parallel_rank style
    }
  }
  // Where the two orders differ (TP 2, PP 2, DP 2, derived by hand): with pp last the pipeline
  // stride is tp*dp = 4; with pp before dp it is tp = 2, and dp takes stride 4.
  const rank_groups pp_last(make_layout(2, 1, 2, 2, 2, 1, 2, "tp-cp-ep-dp-pp"), 8);
  const rank_groups pp_inner(make_layout(2, 1, 2, 2, 2, 1, 2, "tp-cp-pp-ep-dp"), 8);
  CHECK(pp_last.groups(group_kind::pp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(pp_last.groups(group_kind::dp) == group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(pp_inner.groups(group_kind::pp) == group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(pp_inner.groups(group_kind::dp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(pp_inner.groups(group_kind::edp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(consistency_problem(pp_inner).empty());
}

TEST_CASE("orders tp-ep-dp-pp and tp-pp-ep-dp agree where Megatron's consistency test says so",
          "[rank_groups]") {
  // test_different_initialize_order_consistency (8 ranks): for each (tp, pp), ep the groups under
  // order 'tp-ep-dp-pp' equal those under 'tp-pp-ep-dp'.
  struct param {
    int tp, pp, ep;
  };
  for (param p : {param{1, 8, 1}, param{2, 4, 1}, param{4, 2, 1}, param{8, 1, 1}, param{4, 1, 2},
                  param{1, 1, 8}, param{1, 1, 2}, param{2, 1, 4}}) {
    INFO("tp " << p.tp << " pp " << p.pp << " ep " << p.ep);
    const rank_groups a(megatron_layout(8, p.tp, p.pp, 1, p.ep, "tp-ep-dp-pp"), 8);
    const rank_groups b(megatron_layout(8, p.tp, p.pp, 1, p.ep, "tp-pp-ep-dp"), 8);
    for (group_kind kind : kGroupKinds) CHECK(a.groups(kind) == b.groups(kind));
    for (int r = 0; r < 8; ++r) CHECK(a.coords(r) == b.coords(r));
  }
  // The lists themselves, written out by hand for three of those parameters.
  // TP 4, EP 2 (ETP 4, EDP 1): ep strides over the 4 tensor ranks.
  const rank_groups t4e2(megatron_layout(8, 4, 1, 1, 2, "tp-ep-dp-pp"), 8);
  CHECK(t4e2.groups(group_kind::tp) == group_list{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(t4e2.groups(group_kind::dp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(t4e2.groups(group_kind::ep) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(t4e2.groups(group_kind::etp_ep) == group_list{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(t4e2.groups(group_kind::edp) == group_list{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  // TP 2, EP 4 (ETP 2, EDP 1).
  const rank_groups t2e4(megatron_layout(8, 2, 1, 1, 4, "tp-ep-dp-pp"), 8);
  CHECK(t2e4.groups(group_kind::dp) == group_list{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(t2e4.groups(group_kind::ep) == group_list{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(t2e4.groups(group_kind::mp) == group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  // TP 1, EP 2 (EDP 4): the expert-data groups step over the expert groups.
  const rank_groups t1e2(megatron_layout(8, 1, 1, 1, 2, "tp-ep-dp-pp"), 8);
  CHECK(t1e2.groups(group_kind::dp) == group_list{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(t1e2.groups(group_kind::ep) == group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(t1e2.groups(group_kind::edp) == group_list{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(t1e2.groups(group_kind::etp_ep) == group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
}

TEST_CASE("orders tp-ep-dp-pp and tp-pp-ep-dp differ where Megatron's unconsistency test says so",
          "[rank_groups]") {
  // test_different_initialize_order_unconsistency: tp and cp groups agree, dp, pp and model-
  // parallel groups differ. TP 2, PP 2 on 8 ranks, by hand: with pp last pp strides over
  // tp*dp = 4, with pp second it strides over tp = 2.
  const rank_groups a(megatron_layout(8, 2, 2, 1, 1, "tp-ep-dp-pp"), 8);
  const rank_groups b(megatron_layout(8, 2, 2, 1, 1, "tp-pp-ep-dp"), 8);
  CHECK(a.groups(group_kind::tp) == group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(b.groups(group_kind::tp) == a.groups(group_kind::tp));
  CHECK(b.groups(group_kind::cp) == a.groups(group_kind::cp));
  CHECK(a.groups(group_kind::dp) == group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(b.groups(group_kind::dp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(a.groups(group_kind::pp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(b.groups(group_kind::pp) == group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(a.groups(group_kind::mp) == group_list{{0, 1, 4, 5}, {2, 3, 6, 7}});
  CHECK(b.groups(group_kind::mp) == group_list{{0, 1, 2, 3}, {4, 5, 6, 7}});
  // TP 1, PP 2: the dp groups are blocks of 4 with pp last, every other rank with pp first.
  CHECK(rank_groups(megatron_layout(8, 1, 2, 1, 1, "tp-ep-dp-pp"), 8).groups(group_kind::dp) ==
        group_list{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(rank_groups(megatron_layout(8, 1, 2, 1, 1, "tp-pp-ep-dp"), 8).groups(group_kind::dp) ==
        group_list{{0, 2, 4, 6}, {1, 3, 5, 7}});
  // Its case (tp 1, pp 2), ep 2 under 'tp-pp-ep-dp' is one Megatron refuses (the test is
  // xfail, "Checks wrong input"): pp is not last and EDP 2 != DP 4.
  const layout refused = megatron_layout(8, 1, 2, 1, 2, "tp-pp-ep-dp");
  CHECK_FALSE(pipeline_groups_mismatch(refused).has_value());
  CHECK_THAT(expect_error(errc::invalid_input, [&] { rank_groups(refused, 8); }),
             Catch::Contains("edp = 2 and dp = 4") && Catch::Contains("tp-pp-ep-dp"));
}

TEST_CASE("TP 2, PP 2, EP 2 on 8 ranks under the default order", "[rank_groups]") {
  // Attention mesh tp 2, dp 2, pp 2; expert mesh etp 2, ep 2, edp 1, pp 2 (by hand: tp stride
  // 1, cp/ep stride 2, dp stride 2 (attention) or 4 (expert), pp stride 4).
  const rank_groups rg(megatron_layout(8, 2, 2, 1, 2, "tp-cp-ep-dp-pp"), 4);
  CHECK(rg.groups(group_kind::tp) == group_list{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(rg.groups(group_kind::dp) == group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(rg.groups(group_kind::dp_cp) == rg.groups(group_kind::dp));
  CHECK(rg.groups(group_kind::pp) == group_list{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(rg.groups(group_kind::mp) == group_list{{0, 1, 4, 5}, {2, 3, 6, 7}});
  CHECK(rg.groups(group_kind::ep) == group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(rg.groups(group_kind::etp) == rg.groups(group_kind::tp));
  CHECK(rg.groups(group_kind::etp_ep) == group_list{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(rg.groups(group_kind::edp) == group_list{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  CHECK(rg.coords(5) == rank_coords{5, 1, 0, 0, 1, 0, 1, 0, 1, 1});
  CHECK(consistency_problem(rg).empty());
}

namespace {

// test_rank_generator_for_tp_dp_pp's golden_rank_result_from_past_code: Megatron's group loops
// from before RankGenerator, rewritten here as an oracle that shares no code with rank_groups.
struct legacy_groups {
  group_list dp, dp_cp, cp, mp, tp, pp, tp_dp, tp_dp_cp, expert_tp_ep, expert_dp;
};

std::vector<int> stepped(int start, int end, int step) {
  std::vector<int> v;
  for (int r = start; r < end; r += step) v.push_back(r);
  return v;
}

legacy_groups legacy(int world, int tp, int pp, int cp, int ep) {
  legacy_groups out;
  const int dp = world / (tp * pp * cp);
  const int stage = world / pp;  // ranks per pipeline stage
  for (int i = 0; i < pp; ++i) {
    for (int j = 0; j < cp * tp; ++j)
      out.dp.push_back(stepped(i * stage + j, (i + 1) * stage, cp * tp));
    for (int j = 0; j < tp; ++j) out.dp_cp.push_back(stepped(i * stage + j, (i + 1) * stage, tp));
  }
  for (int i = 0; i < pp; ++i)
    for (int j = 0; j < dp; ++j)
      for (int k = 0; k < tp; ++k) {
        const int start = i * stage + j * tp * cp;
        out.cp.push_back(stepped(start + k, start + tp * cp, tp));
      }
  for (int i = 0; i < dp * cp; ++i) {
    std::vector<int> g;
    for (const auto& with_cp : out.dp_cp) g.push_back(with_cp[i]);
    out.mp.push_back(g);
  }
  for (int i = 0; i < world / tp; ++i) out.tp.push_back(stepped(i * tp, (i + 1) * tp, 1));
  for (int i = 0; i < stage; ++i) out.pp.push_back(stepped(i, world, stage));
  const int block = tp * dp * cp;
  for (int i = 0; i < world / block; ++i) {
    out.tp_dp_cp.push_back(stepped(i * block, (i + 1) * block, 1));
    for (int j = 0; j < cp; ++j) {
      std::vector<int> g;
      for (int k = 0; k < dp; ++k)
        for (int t = 0; t < tp; ++t) g.push_back(i * block + j * tp + k * tp * cp + t);
      out.tp_dp.push_back(g);
    }
  }
  // all_ranks reshaped (pp, edp, ep, tp): tp-ep groups are rows of ep*tp; expert-dp groups
  // take the (pp, ep, tp) permutation and vary edp.
  const int edp = world / (tp * ep * pp);
  for (int i = 0; i < world / (ep * tp); ++i)
    out.expert_tp_ep.push_back(stepped(i * ep * tp, (i + 1) * ep * tp, 1));
  for (int p = 0; p < pp; ++p)
    for (int e = 0; e < ep; ++e)
      for (int t = 0; t < tp; ++t) {
        std::vector<int> g;
        for (int d = 0; d < edp; ++d) g.push_back(p * stage + d * ep * tp + e * tp + t);
        out.expert_dp.push_back(g);
      }
  return out;
}

}  // namespace

TEST_CASE("rank generation matches Megatron's legacy group loops over its test parameters",
          "[rank_groups]") {
  // test_rank_generator_for_tp_dp_pp's parameters (nodes, gpus, tp, pp, cp, ep) and its orders:
  // "tp-cp-dp-pp" for the dense generator, "tp-ep-dp-pp" for the expert one.
  struct param {
    int nodes, gpus, tp, pp, cp, ep;
  };
  const std::vector<param> params = {
      {1, 1, 1, 1, 1, 1},   {1, 8, 8, 1, 1, 1},   {1, 8, 2, 2, 1, 1},    {1, 8, 2, 4, 1, 1},
      {3, 8, 8, 3, 1, 1},   {4, 8, 2, 4, 1, 1},   {8, 8, 8, 8, 1, 1},    {8, 8, 2, 1, 1, 4},
      {8, 8, 2, 2, 2, 4},   {8, 8, 2, 1, 4, 8},   {8, 8, 2, 2, 2, 8},    {16, 8, 4, 8, 1, 1},
      {16, 8, 4, 8, 1, 4},  {16, 8, 4, 8, 4, 1},  {16, 8, 8, 8, 1, 1},   {32, 8, 4, 8, 1, 1},
      {32, 8, 8, 8, 1, 1},  {32, 8, 4, 8, 1, 4},  {32, 8, 8, 8, 4, 1},   {64, 8, 4, 2, 8, 8},
      {64, 8, 4, 8, 1, 1},  {64, 8, 8, 8, 1, 1},  {96, 8, 4, 8, 1, 1},   {128, 8, 4, 2, 8, 8},
      {128, 8, 4, 8, 1, 1}, {256, 8, 4, 8, 1, 1}, {316, 8, 4, 8, 1, 1},  {384, 8, 4, 8, 1, 1},
      {512, 8, 4, 8, 1, 1}, {768, 8, 4, 8, 1, 1}, {1024, 8, 4, 8, 1, 1}, {1280, 8, 4, 8, 1, 1},
      {1344, 8, 4, 8, 1, 1}};
  for (const param& p : params) {
    const int world = p.nodes * p.gpus;
    INFO("nodes " << p.nodes << " gpus " << p.gpus << " tp " << p.tp << " pp " << p.pp << " cp "
                  << p.cp << " ep " << p.ep);
    const legacy_groups want = legacy(world, p.tp, p.pp, p.cp, p.ep);
    const layout l = megatron_layout(world, p.tp, p.pp, p.cp, p.ep, "tp-cp-ep-dp-pp");
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "dp") == want.dp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "dp-cp") == want.dp_cp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "cp") == want.cp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "tp-pp") == want.mp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "tp") == want.tp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "pp") == want.pp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "tp-dp") == want.tp_dp);
    CHECK(mesh_groups(l.attn, "tp-cp-dp-pp", "tp-dp-cp") == want.tp_dp_cp);
    CHECK(mesh_groups(l.expert, "tp-ep-dp-pp", "tp-ep") == want.expert_tp_ep);
    CHECK(mesh_groups(l.expert, "tp-ep-dp-pp", "dp") == want.expert_dp);
    // The default order gives the same groups, since ep is 1 in the attention mesh and cp is 1
    // in the expert mesh.
    const rank_groups rg(l, p.gpus);
    CHECK(rg.groups(group_kind::dp_cp) == want.dp_cp);
    CHECK(rg.groups(group_kind::mp) == want.mp);
    CHECK(rg.groups(group_kind::edp) == want.expert_dp);
    CHECK(rg.groups(group_kind::etp_ep) == want.expert_tp_ep);
  }
}

TEST_CASE("AReaL's attention and FFN folding examples", "[rank_groups]") {
  SECTION("attn d4p2t2c2 / ffn d2p2t4e2 on 32 ranks") {
    // Default order tp-cp-ep-dp-pp. Attention strides: tp 1, cp 2, dp 4, pp 16. Expert strides:
    // etp 1, ep 4, edp 8, pp 16. So the TP pair {0, 1} and CP partner 2 share an expert-TP
    // group {0..3}, which is EP-paired with {4..7}; expert-TP-EP is the block {0..7}.
    const rank_groups rg(make_layout(2, 2, 4, 2, 4, 2, 2), 8);
    CHECK(rg.groups(group_kind::tp)[1] == std::vector<int>{2, 3});
    CHECK(rg.groups(group_kind::cp)[0] == std::vector<int>{0, 2});
    CHECK(rg.groups(group_kind::cp)[2] == std::vector<int>{4, 6});
    CHECK(rg.groups(group_kind::dp)[0] == std::vector<int>{0, 4, 8, 12});
    CHECK(rg.groups(group_kind::dp)[4] == std::vector<int>{16, 20, 24, 28});
    // dp-cp: cp (stride 2) varies fastest, then dp (stride 4): every even rank of stage 0.
    CHECK(rg.groups(group_kind::dp_cp)[0] == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14});
    CHECK(rg.groups(group_kind::pp)[5] == std::vector<int>{5, 21});
    CHECK(rg.groups(group_kind::etp)[1] == std::vector<int>{4, 5, 6, 7});
    CHECK(rg.groups(group_kind::ep)[0] == std::vector<int>{0, 4});
    CHECK(rg.groups(group_kind::ep)[4] == std::vector<int>{8, 12});
    CHECK(rg.groups(group_kind::edp)[0] == std::vector<int>{0, 8});
    CHECK(rg.groups(group_kind::edp)[8] == std::vector<int>{16, 24});
    CHECK(rg.groups(group_kind::etp_ep) == group_list{{0, 1, 2, 3, 4, 5, 6, 7},
                                                      {8, 9, 10, 11, 12, 13, 14, 15},
                                                      {16, 17, 18, 19, 20, 21, 22, 23},
                                                      {24, 25, 26, 27, 28, 29, 30, 31}});
    // Rank 13 = tp 1 + cp 0 + dp 3*4 (attention); = etp 1 + ep 1*4 + edp 1*8 (expert); node 1.
    CHECK(rg.coords(13) == rank_coords{13, 1, 0, 3, 0, 1, 1, 1, 1, 5});
    CHECK(consistency_problem(rg).empty());
  }
  SECTION("attn d1p4t2c2 / ffn d1p4t1e4 on 16 ranks") {
    // Attention strides: tp 1, cp 2, pp 4. Expert strides: ep 1, pp 4. Each TP x CP block of 4
    // ranks is one EP group, so the dispatch stays where attention already is.
    const rank_groups rg(make_layout(2, 2, 1, 4, 1, 4, 1), 4);
    CHECK(rg.groups(group_kind::cp) ==
          group_list{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
    CHECK(rg.groups(group_kind::dp_cp) == rg.groups(group_kind::cp));  // dp is 1
    CHECK(rg.groups(group_kind::ep) ==
          group_list{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
    CHECK(rg.groups(group_kind::pp) ==
          group_list{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
    CHECK(rg.groups(group_kind::mp)[1] == std::vector<int>{2, 3, 6, 7, 10, 11, 14, 15});
    CHECK(rg.groups(group_kind::edp).size() == 16);
    CHECK(rg.groups_across_nodes(group_kind::ep).empty());  // 4 GPUs per node
    CHECK(consistency_problem(rg).empty());
  }
}

TEST_CASE("coordinates agree with group membership for every rank", "[rank_groups]") {
  for (const layout& l : {make_layout(2, 2, 2, 2, 1, 4, 2), make_layout(4, 1, 6, 2, 2, 3, 4),
                          make_layout(2, 1, 4, 2, 2, 1, 4, "tp-cp-pp-ep-dp"),
                          make_layout(2, 2, 2, 3, 4, 2, 1), make_layout(1, 1, 1, 1, 1, 1, 1)}) {
    INFO("order " << l.order << " attn " << l.attn.tp << "/" << l.attn.cp << "/" << l.attn.dp << "/"
                  << l.attn.pp << " expert " << l.expert.tp << "/" << l.expert.ep << "/"
                  << l.expert.dp);
    CHECK(consistency_problem(rank_groups(l, 4)) == "");
    CHECK(consistency_problem(rank_groups(l, 3)) == "");
  }
}

TEST_CASE("ranks are placed on nodes in blocks and TP across nodes is found", "[rank_groups]") {
  // TP 8 on nodes of 4 GPUs: both TP groups of 16 ranks span two nodes.
  const rank_groups wide(make_layout(8, 1, 2, 1, 1, 8, 2), 4);
  CHECK(wide.num_nodes() == 4);
  CHECK(wide.tp_groups_across_nodes() == std::vector<int>{0, 1});
  CHECK(wide.node_of(7) == 1);
  CHECK(wide.coords(7).local_rank == 3);
  // The same layout on nodes of 8 GPUs keeps each TP group on one node, and each EP group
  // (8 consecutive ranks, since ETP is 1) too; every DP group spans both nodes.
  const rank_groups fits(make_layout(8, 1, 2, 1, 1, 8, 2), 8);
  CHECK(fits.num_nodes() == 2);
  CHECK(fits.tp_groups_across_nodes().empty());
  CHECK(fits.groups_across_nodes(group_kind::ep).empty());
  CHECK(fits.groups_across_nodes(group_kind::dp) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // 12 ranks on nodes of 6 GPUs with TP 4: [0..3] on node 0, [4..7] on nodes 0 and 1,
  // [8..11] on node 1.
  const rank_groups odd(make_layout(4, 1, 3, 1, 4, 1, 3), 6);
  CHECK(odd.num_nodes() == 2);
  CHECK(odd.tp_groups_across_nodes() == std::vector<int>{1});
  // 12 ranks on nodes of 8: the last node holds 4 ranks.
  const rank_groups partial(make_layout(4, 1, 3, 1, 4, 1, 3), 8);
  CHECK(partial.num_nodes() == 2);
  CHECK(partial.node_of(11) == 1);
  CHECK(partial.coords(11).local_rank == 3);
  CHECK(partial.tp_groups_across_nodes().empty());
  CHECK(to_list(partial.group_of(group_kind::tp, 6)) == group_list{{4, 5, 6, 7}});
}

TEST_CASE("the pipeline groups of the two meshes must match, as Megatron asserts",
          "[rank_groups]") {
  // tp-cp-pp-ep-dp with TP 2 but ETP 1, EP 2: pp steps over tp*cp = 2 ranks in the attention
  // mesh but over etp = 1 in the expert mesh, so pipeline group 0 is [0, 2] vs [0, 1].
  const layout bad = make_layout(2, 1, 2, 2, 1, 2, 2, "tp-cp-pp-ep-dp");
  const auto message = pipeline_groups_mismatch(bad);
  REQUIRE(message.has_value());
  CHECK_THAT(*message, Catch::Contains("parallel.order = \"tp-cp-pp-ep-dp\"") &&
                           Catch::Contains("[0, 2] in the attention mesh but [0, 1]") &&
                           Catch::Contains("tp*cp = 2") && Catch::Contains("etp = 1") &&
                           Catch::Contains("e.g. tp-cp-ep-dp-pp") &&
                           Catch::Contains("tp*cp == etp"));
  CHECK_FALSE(pp_last_order_mismatch(bad).has_value());  // edp == dp: only the pipeline differs
  CHECK(expect_error(errc::invalid_input, [&] { rank_groups(bad, 8); }) == *message);
  // The same sizes with pp last, or with ETP equal to TP*CP under that order, are fine.
  CHECK_FALSE(pipeline_groups_mismatch(make_layout(2, 1, 2, 2, 1, 2, 2)).has_value());
  CHECK_FALSE(
      pipeline_groups_mismatch(make_layout(2, 1, 2, 2, 2, 1, 2, "tp-cp-pp-ep-dp")).has_value());
  CHECK_NOTHROW(rank_groups(make_layout(2, 1, 2, 2, 2, 1, 2, "tp-cp-pp-ep-dp"), 8));
  // Without pipeline parallelism every pipeline group is one rank, in both meshes.
  CHECK_FALSE(
      pipeline_groups_mismatch(make_layout(2, 1, 4, 1, 1, 4, 2, "tp-pp-cp-ep-dp")).has_value());
}

TEST_CASE("malformed orders, tokens and sizes are refused with the input named", "[rank_groups]") {
  const mesh m{2, 1, 1, 4, 1};
  CHECK_THAT(expect_error(errc::invalid_input, [&] { mesh_groups(m, "tp-xp-dp", "tp"); }),
             Catch::Contains("parallel.order = \"tp-xp-dp\": unknown name \"xp\""));
  CHECK_THAT(expect_error(errc::invalid_input, [&] { mesh_groups(m, "tp-dp-tp", "tp"); }),
             Catch::Contains("tp appears twice"));
  CHECK_THAT(expect_error(errc::invalid_input, [&] { mesh_groups(m, "", "tp"); }),
             Catch::Contains("unknown name \"\""));
  CHECK_THAT(expect_error(errc::invalid_input, [&] { mesh_groups(m, "cp-dp-pp", "dp"); }),
             Catch::Contains("tp has size 2 but is missing from the order"));
  CHECK_THAT(expect_error(errc::invalid_input, [&] { mesh_groups(m, "tp-dp", "tp-zz"); }),
             Catch::Contains("rank group \"tp-zz\": unknown name \"zz\""));
  // Names of size 1 may be left out (Megatron appends them); case does not matter.
  CHECK(mesh_groups(m, "TP-DP", "dp") == group_list{{0, 2, 4, 6}, {1, 3, 5, 7}});
  const layout ok = make_layout(2, 1, 4, 1, 2, 1, 4);
  CHECK_THAT(expect_error(errc::invalid_input, [&] { rank_groups(ok, 0); }),
             Catch::Contains("0 GPUs per node"));
  layout wrong_world = ok;
  wrong_world.world = 16;
  expect_error(errc::internal, [&] { rank_groups(wrong_world, 8); });
  const rank_groups rg(ok, 8);
  CHECK_THAT(expect_error(errc::invalid_input, [&] { rg.coords(8); }),
             Catch::Contains("rank 8 is outside the world of 8 ranks"));
  expect_error(errc::invalid_input, [&] { rg.group_of(group_kind::tp, -1); });
}

TEST_CASE("a 16384-rank layout builds in well under a second", "[rank_groups]") {
  // 2048 nodes of 8: TP 8, CP 2, DP 64, PP 16; ETP 1, EP 64, EDP 16.
  const layout l = make_layout(8, 2, 64, 16, 1, 64, 16);
  REQUIRE(l.world == 16384);
  const auto start = std::chrono::steady_clock::now();
  const rank_groups rg(l, 8);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed < std::chrono::milliseconds(500));
  CHECK(rg.num_nodes() == 2048);
  CHECK(rg.groups(group_kind::tp).size() == 2048);
  CHECK(rg.groups(group_kind::dp_cp).size() == 128);
  CHECK(rg.groups(group_kind::ep).size() == 256);
  CHECK(rg.tp_groups_across_nodes().empty());
  CHECK(rg.groups_across_nodes(group_kind::ep).size() == 256);  // EP 64 spans 8 nodes
  // The last rank is at the last coordinate of every dimension of both meshes.
  CHECK(rg.coords(16383) == rank_coords{16383, 7, 1, 63, 15, 63, 0, 15, 2047, 7});
  CHECK(rg.group_of(group_kind::pp, 0).back() == 15 * 1024);
  CHECK(consistency_problem(rg).empty());
}
