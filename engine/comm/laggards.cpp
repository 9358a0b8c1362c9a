// The ranks behind a collective: see laggards.hpp.
#include "engine/comm/laggards.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace muster::engine::comm {

namespace {
constexpr std::chrono::milliseconds kBoardLimit{3000};
}  // namespace

std::string seq_key(const std::string& group, int rank) {
  return fmt::format("muster/{}/seq/{}", group, rank);
}

std::string laggards(seq_board& board, const std::string& group, const std::vector<int>& members,
                     std::int64_t seq) {
  std::vector<std::string> keys;
  for (std::size_t r = 0; r < members.size(); ++r) keys.push_back(seq_key(group, int(r)));
  const auto seen = board.read(keys, kBoardLimit);
  if (!seen)
    return fmt::format(
        "unknown: the rendezvous store (served by world rank 0's process) did not answer "
        "within {} ms",
        kBoardLimit.count());
  std::string out;
  for (std::size_t r = 0; r < members.size(); ++r) {
    const auto& theirs = (*seen)[r];
    if (theirs && *theirs >= seq) continue;
    const auto at = !theirs                   ? std::string("never joined the group")
                    : *theirs == kJoinedGroup ? std::string("no collective yet")
                                              : fmt::format("at seq {}", *theirs);
    out += fmt::format("{}rank {} ({})", out.empty() ? "" : ", ", members[r], at);
  }
  return out.empty() ? "none (every rank got there; the failure is in the transfer)" : out;
}

void throw_collective_failure(const collective_failure& f, seq_board& board,
                              const std::vector<int>& members) {
  const auto how = f.timed_out ? fmt::format("timed out after {} ms", f.timeout.count())
                               : fmt::format("failed after {} ms (timeout {} ms)", f.waited.count(),
                                             f.timeout.count());
  const auto what = f.seq == kJoinedGroup ? std::string(f.op)
                                          : fmt::format("{} seq={} bytes={}", f.op, f.seq, f.bytes);
  MUSTER_THROW(errc::comm, "[rank {}/{} group {}] {} {}; not arrived: {} ({})", f.rank, f.size,
               f.group, what, how, laggards(board, f.group, members, f.seq), f.error);
}

}  // namespace muster::engine::comm
