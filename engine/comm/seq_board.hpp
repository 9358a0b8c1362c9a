// seq_board: where each rank says how far it got (the sequence number of its latest collective
// in each group), so a collective that times out can name the ranks that never arrived.
//
// Off the collective path: publish() only notes the number; one thread of the board's own
// writes it to the rendezvous store, over a connection of its own. A store that stops answering
// (its host, rank 0, SIGSTOPped; a peer stopped halfway through a request wedges c10d's
// single-threaded TCPStore server) then holds up the board, never a collective, and read()
// gives up at its limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace muster::engine::comm {

class seq_board {
 public:
  // `store`: a client used by the board's thread only.
  explicit seq_board(c10::intrusive_ptr<c10d::Store> store);
  // Stops the thread; one still blocked in the store after a second is left to the process's
  // exit (it holds what it uses).
  ~seq_board();
  seq_board(const seq_board&) = delete;
  seq_board& operator=(const seq_board&) = delete;

  // Notes that this rank reached `seq` under `key`; returns at once. Later numbers for a key
  // replace earlier ones not yet written.
  void publish(const std::string& key, std::int64_t seq);

  // The numbers under `keys` as the store has them (nullopt for a key never written), or
  // nullopt when the store did not answer within `limit`. Numbers this rank published before
  // are written first.
  std::optional<std::vector<std::optional<std::int64_t>>> read(const std::vector<std::string>& keys,
                                                               std::chrono::milliseconds limit);

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace muster::engine::comm
