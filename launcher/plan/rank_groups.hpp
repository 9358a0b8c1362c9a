// Megatron-Core's rank groups, computed without torch: which global ranks form each TP, CP, DP,
// DP-CP, PP, model-parallel (TP-PP), EP, expert-TP, expert-DP and expert-TP-EP group, the
// coordinates of every rank along each dimension, and the node each rank runs on under Slurm's
// block distribution. The groups, their order and the order of ranks inside them are those of
// megatron/core/parallel_state.py (RankGenerator over generate_masked_orthogonal_rank_groups,
// one generator per mesh, both with the same --order), so the launcher, the engine and the
// error messages agree with what Megatron builds for the same layout.
//
// Not here: choosing or checking the sizes (layout_resolve.hpp), creating communicators
// (engine/comm/), and Megatron's derived groups (embedding, hierarchical CP, partial
// distributed-optimizer instances), which are slices of the groups here.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/plan/layout.hpp"

namespace muster::launcher::plan {

// Megatron's generate_masked_orthogonal_rank_groups.
// `sizes` are the sizes of the dimensions, fastest-varying first, so that
// rank = sum_i coord[i] * prod(sizes[0..i)); `mask[i]` says whether the groups span dimension i.
// Returns world / prod(masked sizes) groups. Group g holds the ranks whose unmasked coordinates
// are g decomposed over the unmasked sizes (first unmasked dimension fastest); its member j is
// the rank whose masked coordinates are j decomposed the same way over the masked sizes.
// Throws errc::invalid_input when sizes and mask differ in length, a size is < 1, or
// prod(sizes) != world.
std::vector<std::vector<int>> masked_orthogonal_groups(int world, std::span<const int> sizes,
                                                       std::span<const bool> mask);

// Megatron's RankGenerator(tp, ep, dp, pp, cp, order).get_ranks(token) over the ranks of `m`.
// `order` names the dimensions fastest-varying first, separated by '-' ("tp-cp-ep-dp-pp"), each
// of tp, cp, ep, dp, pp at most once (case-insensitive); a name missing from it is appended (in
// Megatron's order tp, pp, dp, ep, cp) and must then have size 1. `token` names the dimensions
// the groups span, e.g. "tp", "dp-cp", "tp-pp", "tp-ep"; the order of its names does not matter.
// Throws errc::invalid_input naming the order or token when either is malformed, or when a
// dimension of size > 1 is missing from the order.
std::vector<std::vector<int>> mesh_groups(const mesh& m, std::string_view order,
                                          std::string_view token);

// The groups Megatron builds (parallel_state.py initialize_model_parallel). The first six come
// from the attention mesh, the last four from the expert mesh.
enum class group_kind {
  tp,      // tensor parallel: get_ranks("tp") of the attention mesh
  cp,      // context parallel: "cp"
  dp,      // data parallel without CP: "dp"
  dp_cp,   // data parallel with CP, where non-expert gradients are reduced: "dp-cp"
  pp,      // pipeline: "pp" (the same in both meshes; checked)
  mp,      // model parallel (tensor and pipeline): "tp-pp"
  ep,      // expert model parallel: "ep" of the expert mesh
  etp,     // expert tensor parallel: "tp" of the expert mesh
  edp,     // expert data parallel, where expert gradients are reduced: "dp" of the expert mesh
  etp_ep,  // expert tensor and model parallel, the MoE token dispatch group: "tp-ep"
};

// Every group kind, in declaration order.
inline constexpr std::array<group_kind, 10> kGroupKinds = {
    group_kind::tp, group_kind::cp, group_kind::dp,  group_kind::dp_cp, group_kind::pp,
    group_kind::mp, group_kind::ep, group_kind::etp, group_kind::edp,   group_kind::etp_ep};

// Stable name for logs and messages: "tp", "cp", "dp", "dp-cp", "pp", "tp-pp", "ep",
// "expert-tp", "expert-dp", "expert-tp-ep".
std::string_view group_name(group_kind kind);

// Where one rank sits: its coordinate along each dimension (the rank decomposed over the
// ordered sizes of the attention mesh for tp, cp, dp, pp, of the expert mesh for ep, etp, edp)
// and its node under block placement.
struct rank_coords {
  int rank = 0;        // global rank
  int tp = 0;          // attention mesh
  int cp = 0;          // attention mesh
  int dp = 0;          // attention mesh
  int pp = 0;          // both meshes (their pipeline groups are the same)
  int ep = 0;          // expert mesh
  int etp = 0;         // expert mesh
  int edp = 0;         // expert mesh
  int node = 0;        // rank / gpus_per_node
  int local_rank = 0;  // rank % gpus_per_node

  bool operator==(const rank_coords&) const = default;
};

// Megatron's pipeline-group check: nullopt when the attention and expert meshes of `l` give the
// same pipeline groups under l.order, else a message for the user that names the order, the
// sizes and the fix. Megatron asserts "Pipeline parallel groups are expected to be the same for
// Non-Expert and Expert part" at initialization. Throws errc::invalid_input for a malformed order.
std::optional<std::string> pipeline_groups_mismatch(const layout& l);

// Megatron's other order check: when the order does not end with pp and pp > 1, the attention
// DP and the expert DP must be equal ("When not using pp-last rank ordering, the data parallel
// size of the attention and moe layers must be the same"). nullopt when it holds, else a
// message for the user with the sizes and the fix.
std::optional<std::string> pp_last_order_mismatch(const layout& l);

// All groups of one layout, and O(1) lookups from a rank to its group, its position in it and
// its node. Immutable once built; safe to share across threads.
class rank_groups {
 public:
  // Builds every group of `l` with ranks placed on nodes in blocks of `gpus_per_node` (Slurm's
  // block distribution; the last node may hold fewer). Throws errc::invalid_input when
  // gpus_per_node < 1 or when a check above fails (pipeline_groups_mismatch,
  // pp_last_order_mismatch, a malformed order), errc::internal when a mesh does not cover
  // l.world ranks. Linear in l.world.
  rank_groups(const layout& l, int gpus_per_node);

  // Number of ranks.
  int world() const { return world_; }
  // Ranks per node given to the constructor.
  int gpus_per_node() const { return gpus_per_node_; }
  // Nodes the ranks occupy: ceil(world / gpus_per_node).
  int num_nodes() const { return (world_ + gpus_per_node_ - 1) / gpus_per_node_; }

  // Every group of `kind`, in Megatron's order (the order Megatron calls new_group in).
  const std::vector<std::vector<int>>& groups(group_kind kind) const;
  // Index into groups(kind) of the group holding `rank`. Throws errc::invalid_input for a rank
  // outside [0, world).
  int group_index(group_kind kind, int rank) const;
  // The group of `kind` holding `rank` (Megatron's get_*_group ranks for that rank).
  std::span<const int> group_of(group_kind kind, int rank) const;
  // Position of `rank` in its group of `kind` (Megatron's get_*_rank); for a one-dimension kind
  // it equals that coordinate in coords().
  int rank_in_group(group_kind kind, int rank) const;

  // Coordinates and node of `rank`.
  rank_coords coords(int rank) const;
  // Node of `rank`: rank / gpus_per_node.
  int node_of(int rank) const;

  // Indices of the groups of `kind` whose members are on more than one node, ascending.
  std::vector<int> groups_across_nodes(group_kind kind) const;
  // Indices of the TP groups that span nodes (TP traffic would leave NVLink), ascending.
  std::vector<int> tp_groups_across_nodes() const { return groups_across_nodes(group_kind::tp); }

 private:
  struct kind_table {
    std::vector<std::vector<int>> groups;  // groups in Megatron's order
    std::vector<int> index_of_rank;        // rank -> index into groups
    std::vector<int> position_of_rank;     // rank -> position inside its group
  };

  const kind_table& table(group_kind kind) const;
  void check_rank(int rank) const;

  int world_ = 1;
  int gpus_per_node_ = 1;
  mesh attn_;
  mesh expert_;
  // Stride of each dimension (indexed tp, cp, ep, dp, pp) in each mesh under the order:
  // coordinate = rank / stride % size.
  std::array<int, 5> attn_strides_{};
  std::array<int, 5> expert_strides_{};
  std::array<kind_table, kGroupKinds.size()> tables_;
};

}  // namespace muster::launcher::plan
