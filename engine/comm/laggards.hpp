// Which ranks of a group never reached a collective: each rank puts its collectives' sequence
// numbers on the seq_board (muster/<group>/seq/<rank>), and a timed-out collective reads them
// back to name the ranks still behind it. Shared by every backend's error line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/seq_board.hpp"

namespace muster::engine::comm {

// The board key of `rank` (in the group) of group `group`.
std::string seq_key(const std::string& group, int rank);

// The number a rank puts on the board as it joins a group, before its first collective (seq 0).
inline constexpr std::int64_t kJoinedGroup = -1;

// "rank 3 (at seq 6), rank 5 (no collective yet), rank 6 (never joined the group)": the members
// (world ranks, in group order) whose number is under `seq`; "none (...)" when every one got
// there, "unknown: ..." when the store did not answer within 3 s.
std::string laggards(seq_board& board, const std::string& group, const std::vector<int>& members,
                     std::int64_t seq);

// A failed or timed-out collective, as every backend says it (c10d's style). Timed out:
// [rank 1/2 group world] all_reduce seq=7 bytes=4096 timed out after 2000 ms; not arrived:
// rank 0 (at seq 6) (<the backend's error>)
// Failed before its timeout (a peer's connection closed, an error of the backend):
// [rank 0/2 group world] all_reduce seq=7 bytes=4096 failed after 12 ms (timeout 2000 ms); not
// arrived: none (...) (<the backend's error>)
// A group that did not form (seq kJoinedGroup), named by the members that never joined it:
// [rank 0/3 group world] connect timed out after 2000 ms; not arrived: rank 2 (never joined
// the group) (<the backend's error>)
struct collective_failure {
  int rank = 0, size = 0;
  std::string group;
  const char* op = "";
  std::int64_t seq = 0, bytes = 0;
  std::chrono::milliseconds timeout{0};
  std::string error;
  std::chrono::milliseconds waited{0};  // how long this rank waited for it
  bool timed_out = false;               // it ran out its timeout (else it failed)
};

// Throws errc::comm with that line, the laggards read from `board`.
[[noreturn]] void throw_collective_failure(const collective_failure& f, seq_board& board,
                                           const std::vector<int>& members);

}  // namespace muster::engine::comm
