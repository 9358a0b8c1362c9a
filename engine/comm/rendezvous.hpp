// What the world group holds for groups of other backends built beside it (NCCL): the
// rendezvous store (the NCCL unique id travels through it), the seq_board (for the error line's
// laggards) and the world's options.
#pragma once

#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "engine/comm/communicator.hpp"
#include "engine/comm/seq_board.hpp"

namespace muster::engine::comm {

struct rendezvous {
  c10::intrusive_ptr<c10d::Store> store;
  std::shared_ptr<seq_board> board;
  int world_rank = 0;
  world_options times;
};

// `world` must be the group make_world() made.
rendezvous rendezvous_of(communicator& world);

}  // namespace muster::engine::comm
