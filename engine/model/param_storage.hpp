// Tensors whose storage comes and goes while the tensor (and every view of it) stays: how a
// gathered FSDP buffer is dropped without invalidating the views autograd saved, and how a
// model is built as shapes only (model_config::shapes_only) before its shards are materialised.
#pragma once

#include <torch/torch.h>

namespace muster::engine::model {

// The storage under `t` (and every view of it) freed.
void free_storage(const torch::Tensor& t);
// The storage under `t` (and every view of it) made `from`'s memory, not owned: `from` (at
// least as many bytes as `t`'s elements) must stay alive until free_storage(t).
void borrow_storage(const torch::Tensor& t, const torch::Tensor& from);

// Whether `t` has memory for its elements (false after free_storage).
bool materialised(const torch::Tensor& t);

}  // namespace muster::engine::model
