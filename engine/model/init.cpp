// Layout-independent initialisation: see init.hpp.
#include "engine/model/init.hpp"

#include <ATen/CPUGeneratorImpl.h>

namespace muster::engine::model {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::uint64_t parameter_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ULL;
  // splitmix64 of the mix, so nearby seeds give unrelated streams
  std::uint64_t z = h ^ (seed + 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void init_parameter(std::string_view name, torch::Tensor& whole, std::uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  if (ends_with(name, "norm.weight")) {
    whole.fill_(1.0);
  } else if (ends_with(name, ".bias")) {
    whole.zero_();
  } else {
    // drawn on the CPU in fp32, so the values do not depend on the device or dtype
    auto gen = at::make_generator<at::CPUGeneratorImpl>(parameter_seed(seed, name));
    whole.copy_(torch::empty(whole.sizes(), torch::kFloat32).normal_(0.0, std, gen));
  }
}

void init_parameters(torch::nn::Module& module, std::uint64_t seed, double std) {
  for (auto& item : module.named_parameters()) init_parameter(item.key(), item.value(), seed, std);
}

}  // namespace muster::engine::model
