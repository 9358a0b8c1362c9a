// Initial parameter values that do not depend on the parallel layout: every parameter is drawn
// from its own generator, seeded by the run's seed and the parameter's name, so a 1-rank and
// an 8-rank run (each rank slicing its shard from the same draw) start from the same model.
// A model built as shapes only (model_config::shapes_only) is initialised unit by unit as it is
// sharded, each rank drawing a parameter whole and keeping its slice (engine/parallel/flat_unit).
// Weights ~ N(0, std) (Hugging Face's initializer_range, 0.02), RMSNorm weights 1, biases 0.
#pragma once

#include <cstdint>
#include <string_view>

#include <torch/torch.h>

namespace muster::engine::model {

// The generator seed of one parameter: FNV-1a of its name, mixed with `seed`.
std::uint64_t parameter_seed(std::uint64_t seed, std::string_view name);

// The initial values of parameter `name` into `whole` (its full shape, any device or dtype).
void init_parameter(std::string_view name, torch::Tensor& whole, std::uint64_t seed,
                    double std = 0.02);

// Initialises every parameter of `module` in place (under no_grad).
void init_parameters(torch::nn::Module& module, std::uint64_t seed, double std = 0.02);

}  // namespace muster::engine::model
