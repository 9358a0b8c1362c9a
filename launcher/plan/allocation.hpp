// AReaL's allocation strings for one training component: "d4t2p2", "megatron:d2p2t4e4", and MoE
// parallel folding "megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)".
//
// Grammar (whitespace ignored):
//   allocation := [backend ":"] (dims | "(" "attn:" attn_dims "|" "ffn:" ffn_dims ")")
//   backend    := "megatron" | "fsdp" | "archon"
//   dims       := one or more of d|t|p|c|e followed by a size >= 1, each letter at most once
//   attn_dims  := as dims without e;   ffn_dims := as dims without c
// The parentheses around the folded form are optional, as in AReaL. Inference components
// (sglang, vllm) and multi-component strings ('+') are refused with the training part to use.
// Not here: deriving missing sizes or checking them against the world (layout_resolve.hpp).
#pragma once

#include <string>
#include <string_view>

namespace muster::launcher::plan {

// The sizes an allocation string gives; 0 = not given.
struct allocation {
  std::string backend;  // "megatron", "fsdp", "archon", or "" when the string has no prefix
  bool folded = false;  // the (attn:...|ffn:...) form
  int d = 0;            // data parallel (attention half when folded)
  int t = 0;            // tensor parallel
  int p = 0;            // pipeline parallel
  int c = 0;            // context parallel
  int e = 0;            // expert parallel (unfolded form only)
  int ffn_d = 0;        // folded: expert data parallel
  int ffn_t = 0;        // folded: expert tensor parallel
  int ffn_p = 0;        // folded: pipeline parallel, must equal p when both are given
  int ffn_e = 0;        // folded: expert parallel
};

// Parses `text`. Throws errc::config with the column of the mistake and a corrected example.
allocation parse_allocation(std::string_view text);

// The allocation string of a layout's sizes, with `backend` as prefix ("" for none): the
// unfolded form "d4t2p2" (sizes of 1 left out, d always written) when experts are not
// tensor-parallel and share nothing else, else the folded "(attn:d..p..t..c..|ffn:d..p..t..e..)".
// parse_allocation(format_allocation(...)) resolves to the same sizes.
std::string format_allocation(std::string_view backend, int dp, int tp, int pp, int cp, int edp,
                              int etp, int ep);

}  // namespace muster::launcher::plan
