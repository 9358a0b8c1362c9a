// The two points in autograd's backward where a gather group (the units one layer uses, see
// sharded_model.hpp) must act, as identity functions placed in forward:
//   mark_outputs  on everything the group's forward returns: its backward runs before any of
//                 the group's own backward ops (they all consume these outputs' gradients), and
//                 gathers the group's parameters again and gives their gradients a buffer,
//                 then prefetches the parameters of the group whose backward comes next;
//   mark_input    on the group's input: its backward runs once the group's backward ops are
//                 done (autograd runs the ready node created last first, and every op of the
//                 group, and each parameter's gradient accumulation, was created after this
//                 identity), and reduces the group's gradients and releases its parameters.
// A group whose input needs no gradient (the embedding) is finished by the caller after
// backward instead (sharded_model::finish_backward).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "engine/parallel/flat_unit.hpp"

namespace muster::engine::parallel {

struct unit_group;

// The group whose gradients' reduce-scatter was left running (flat_unit's overlap_reduce): the
// next group to end its backward finishes it before starting its own, so one group's reduction
// runs while the group below computes, and at most two groups' whole gradients exist at once.
struct reducing_group {
  unit_group* group = nullptr;
};

struct unit_group {
  std::vector<flat_unit*> units;
  bool params_in_backward = true;  // false: backward needs only the gradient buffers (embedding)
  unit_group* backward_next = nullptr;  // the group whose backward follows, prefetched
  reducing_group* reducing = nullptr;   // shared by a model's groups; null: no overlap
  void gather();
  void prefetch();
  void release();
  void begin_backward();
  // Finishes the reducing group's reduction (another group's), then ends this group's
  // backward (flat_unit::end_backward) and becomes the reducing group.
  void end_backward();
  void finish_reduce();
};

// `group` must outlive the backward of every graph these take part in.
torch::autograd::variable_list mark_outputs(unit_group* group,
                                            const torch::autograd::variable_list& outputs);
torch::Tensor mark_input(unit_group* group, const torch::Tensor& input);

}  // namespace muster::engine::parallel
