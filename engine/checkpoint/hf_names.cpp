// Tensor names between the engine and Hugging Face: see hf_names.hpp.
#include "engine/checkpoint/hf_names.hpp"

#include <array>
#include <utility>

namespace muster::engine::checkpoint {

std::string to_hf_name(std::string_view ours) {
  if (ours.starts_with("lm_head.")) return std::string(ours);
  return "model." + std::string(ours);
}

std::string from_hf_name(std::string_view hf) {
  std::string name(hf.starts_with("model.") ? hf.substr(6) : hf);
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kMixtral{{
      {".w1.", ".gate_proj."}, {".w3.", ".up_proj."}, {".w2.", ".down_proj."}}};
  constexpr std::string_view moe = ".block_sparse_moe.";
  if (auto at = name.find(moe); at != std::string::npos) {
    name.replace(at, moe.size(), ".mlp.");
    for (const auto& [from, to] : kMixtral) {
      if (auto w = name.find(from); w != std::string::npos) name.replace(w, from.size(), to);
    }
  }
  return name;
}

}  // namespace muster::engine::checkpoint
