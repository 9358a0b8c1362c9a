// A resolved parallel layout: how many ranks, and the sizes of the two meshes Megatron-Core
// builds over them. The dense/attention mesh is TP x CP x DP x PP = world; the expert mesh is
// ETP x EP x EDP x PP = world. EP is carved out of the expert-data-parallel ranks, so it does not
// reduce the attention DP; both meshes share PP.
//
// resolve_layout() (layout_resolve.hpp) makes one from the job file and the world size; the
// rank groups (rank_groups.hpp), batch arithmetic (batch_plan.hpp) and memory estimate
// (memory_estimate.hpp) take it as given. Every field here is already checked.
#pragma once

#include <string>

namespace muster::launcher::plan {

// One mesh of Megatron's rank generator. In the attention mesh ep == 1; in the expert mesh
// cp == 1, tp is the expert tensor-parallel size and dp the expert data-parallel size.
struct mesh {
  int tp = 1;
  int cp = 1;
  int ep = 1;
  int dp = 1;
  int pp = 1;
  int size() const { return tp * cp * ep * dp * pp; }
};

struct layout {
  int world = 1;
  mesh attn;                        // tp, cp, dp, pp (ep = 1)
  mesh expert;                      // etp (as tp), ep, edp (as dp), pp (cp = 1)
  int vpp = 1;                      // model chunks per pipeline rank; 1 = not interleaved
  int first_stage_layers = 0;       // layers of pipeline stage 0; 0 = an even split
  int last_stage_layers = 0;        // layers of the last pipeline stage; 0 = an even split
  bool sequence_parallel = false;
  std::string order = "tp-cp-ep-dp-pp";  // Megatron's --order, fastest-varying first

  int tp() const { return attn.tp; }
  int cp() const { return attn.cp; }
  int dp() const { return attn.dp; }
  int pp() const { return attn.pp; }
  int ep() const { return expert.ep; }
  int etp() const { return expert.tp; }
  int edp() const { return expert.dp; }
  // Ranks a non-expert parameter is sharded over (Megatron shards over the dp-cp group).
  int dense_shard_ranks() const { return attn.dp * attn.cp; }
  // Ranks an expert parameter is sharded over (the expert-data-parallel group).
  int expert_shard_ranks() const { return expert.dp; }
};

}  // namespace muster::launcher::plan
