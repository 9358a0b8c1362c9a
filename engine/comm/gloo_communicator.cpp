// Collectives over c10d's ProcessGroupGloo and TCPStore (the CPU backend): see communicator.hpp.
//
// Gloo in LibTorch 1.13 lacks reduce_scatter, the flat all_gather and bf16: reduce_scatter is
// an all_to_all of equal chunks and a local sum, all_gather the list form concatenated, and
// bf16 travels as fp32. Each collective's sequence number goes on the process's seq_board
// (muster/<group>/seq/<rank> in the rendezvous store, written off the collective path), so a
// timeout can name the ranks that never got there.
#include <cstdlib>
#include <exception>
#include <functional>
#include <numeric>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/error.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/comm/laggards.hpp"
#include "engine/comm/pending_call.hpp"
#include "engine/comm/rendezvous.hpp"
#include "engine/comm/seq_board.hpp"
#include "engine/comm/wait_clock.hpp"

namespace muster::engine::comm {
namespace {

// A copy in a type Gloo carries (bf16 -> fp32), contiguous.
torch::Tensor on_wire(const torch::Tensor& t) {
  return (t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat32) : t).contiguous();
}

class gloo_group final : public communicator {
 public:
  gloo_group(c10::intrusive_ptr<c10d::Store> root, std::shared_ptr<seq_board> board,
             std::string name, std::vector<int> members, int world_rank, const world_options& times)
      : root_(std::move(root)),
        board_(std::move(board)),
        name_(std::move(name)),
        members_(std::move(members)),
        world_rank_(world_rank),
        times_(times),
        timeout_(times.timeout) {
    rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), world_rank) -
                             members_.begin());
    MUSTER_CHECK(rank_ < static_cast<int>(members_.size()), errc::internal,
                 "rank {} is not a member of group {}", world_rank, name_);
    store_ = c10::make_intrusive<c10d::PrefixStore>("muster/" + name_, root_);
    // Connecting the group waits for every member (connect_timeout); each collective then
    // carries its own, shorter limit in its options.
    auto options = c10d::ProcessGroupGloo::Options::create(times.connect_timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    // on the board before it waits: a member that never comes is named by its absence
    board_->publish(seq_key(name_, rank_), kJoinedGroup);
    const auto began = std::chrono::steady_clock::now();
    try {
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, size(), options);
    } catch (const std::exception& e) {
      collective_failure f;
      f.rank = rank_;
      f.size = size();
      f.group = name_;
      f.op = "connect";
      f.seq = kJoinedGroup;
      f.timeout = times.connect_timeout;
      f.error = first_line(e.what());
      f.waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - began);
      f.timed_out = f.waited >= f.timeout * 9 / 10;  // Gloo's own wait ends a little early
      throw_collective_failure(f, *board_, members_);
    }
  }

  // A group whose collective failed may still have a Gloo thread blocked on a peer that never
  // comes; destroying it would wait for that thread. It is left to the process's exit.
  ~gloo_group() override {
    if (broken_) (void)group_.release();
  }
  gloo_group(const gloo_group&) = delete;
  gloo_group& operator=(const gloo_group&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::string& name() const override { return name_; }
  std::int64_t sequence() const override { return sequence_; }
  const c10::intrusive_ptr<c10d::Store>& root() const { return root_; }
  const std::shared_ptr<seq_board>& board() const { return board_; }

  std::shared_ptr<communicator> subgroup(const std::string& name,
                                         const std::vector<int>& ranks) override {
    MUSTER_CHECK(name_ == "world", errc::internal, "make_group({}) needs the world group, not {}",
                 name, name_);
    return std::make_shared<gloo_group>(root_, board_, name, ranks, world_rank_, times_);
  }
  int world_rank() const { return world_rank_; }
  const world_options& times() const { return times_; }

  void all_reduce_sum(torch::Tensor& t) override { all_reduce_sum_async(t)->wait(); }

  std::unique_ptr<pending_collective> all_reduce_sum_async(torch::Tensor& t) override {
    std::vector<torch::Tensor> wire{on_wire(t)};
    c10d::AllreduceOptions options;
    options.timeout = timeout_;
    auto started = start("all_reduce", wire[0], [&] { return group_->allreduce(wire, options); });
    return std::make_unique<pending_call>([this, s = std::move(started)] { finish(s); },
                                          [t, wire]() mutable {
                                            if (!wire[0].is_same(t)) t.copy_(wire[0]);
                                          });
  }

  std::unique_ptr<pending_collective> all_gather_into_async(const torch::Tensor& shard,
                                                            torch::Tensor& out) override {
    std::vector<torch::Tensor> in{on_wire(shard).reshape({-1})};
    const auto n = in[0].numel();
    check_into("all_gather", out, n * size());
    // Gloo copies each rank's part into a tensor of a list: views of `out` where it is of the
    // wire type, else of a flat tensor copied into it after.
    const bool direct = out.scalar_type() == in[0].scalar_type() && out.device().is_cpu();
    auto flat = direct ? out.view({-1}) : torch::empty({n * size()}, in[0].options());
    std::vector<std::vector<torch::Tensor>> parts(1);
    for (int r = 0; r < size(); ++r) parts[0].push_back(flat.narrow(0, r * n, n));
    c10d::AllgatherOptions options;
    options.timeout = timeout_;
    auto started =
        start("all_gather", in[0], [&] { return group_->allgather(parts, in, options); });
    // the tensors the work reads and writes stay alive with the handle
    return std::make_unique<pending_call>([this, s = std::move(started)] { finish(s); },
                                          [direct, out, flat, in, parts]() mutable {
                                            if (!direct) out.view({-1}).copy_(flat);
                                          });
  }

  // Gloo's reduce-scatter as an all-to-all, each rank then summing the parts it received.
  std::unique_ptr<pending_collective> reduce_scatter_sum_into_async(const torch::Tensor& full,
                                                                    torch::Tensor& out) override {
    auto in = on_wire(full).reshape({-1});
    MUSTER_CHECK(in.numel() % size() == 0, errc::internal,
                 "reduce_scatter of {} elements over {} ranks", in.numel(), size());
    check_into("reduce_scatter", out, in.numel() / size());
    auto got = torch::empty_like(in);
    std::vector<std::int64_t> equal;  // empty: equal splits
    c10d::AllToAllOptions options;
    options.timeout = timeout_;
    auto started = start("reduce_scatter", in,
                         [&] { return group_->alltoall_base(got, in, equal, equal, options); });
    // the tensors the work reads and writes stay alive with the handle
    return std::make_unique<pending_call>([this, s = std::move(started)] { finish(s); },
                                          [out, got, in, n = size()]() mutable {
                                            out.view({-1}).copy_(got.view({n, -1}).sum(0));
                                          });
  }

  torch::Tensor all_to_all(const torch::Tensor& input, const std::vector<std::int64_t>& send_rows,
                           const std::vector<std::int64_t>& recv_rows) override {
    MUSTER_CHECK(
        static_cast<int>(send_rows.size()) == size() &&
            static_cast<int>(recv_rows.size()) == size() &&
            std::accumulate(send_rows.begin(), send_rows.end(), std::int64_t(0)) == input.size(0),
        errc::internal, "all_to_all: {} rows, send counts of {} ranks, group of {}", input.size(0),
        send_rows.size(), size());
    auto in = on_wire(input);
    auto shape = in.sizes().vec();
    shape[0] = std::accumulate(recv_rows.begin(), recv_rows.end(), std::int64_t(0));
    auto out = torch::empty(shape, in.options());
    auto sends = send_rows, recvs = recv_rows;
    c10d::AllToAllOptions options;
    options.timeout = timeout_;
    run("all_to_all", in, [&] { return group_->alltoall_base(out, in, recvs, sends, options); });
    return out.to(input.scalar_type());
  }

  void broadcast(torch::Tensor& t, int root) override {
    std::vector<torch::Tensor> wire{on_wire(t)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = timeout_;
    run("broadcast", wire[0], [&] { return group_->broadcast(wire, options); });
    if (!wire[0].is_same(t)) t.copy_(wire[0]);
  }

  void barrier() override {
    c10d::BarrierOptions options;
    options.timeout = timeout_;
    run("barrier", torch::Tensor(), [&] { return group_->barrier(options); });
  }

 private:
  // A collective issued to Gloo: what its error line needs.
  struct started {
    const char* op;
    std::int64_t seq, bytes;
    c10::intrusive_ptr<c10d::Work> work;  // null: issuing it failed (error set)
    std::string error;
  };

  // Puts the sequence number on the board (for laggards()) and issues the collective.
  template <class Issue>
  started start(const char* op, const torch::Tensor& data, Issue issue) {
    started s{op, sequence_++, data.defined() ? data.numel() * data.element_size() : 0, {}, {}};
    board_->publish(seq_key(name_, rank_), s.seq);
    try {
      s.work = issue();
    } catch (const std::exception& e) {
      s.error = first_line(e.what());
    }
    return s;
  }

  // Waits for a started collective; throws the c10d-style line when it failed or timed out.
  void finish(const started& s) {
    std::string error = s.error;
    std::chrono::milliseconds waited{0};
    if (s.work) {
      const auto waiting = std::chrono::steady_clock::now();
      try {
        s.work->wait(timeout_);
      } catch (const std::exception& e) {
        error = first_line(e.what());
      }
      const auto took = std::chrono::steady_clock::now() - waiting;
      add_wait_seconds(std::chrono::duration<double>(took).count());
      waited = std::chrono::duration_cast<std::chrono::milliseconds>(took);
    }
    if (error.empty()) return;
    broken_ = true;
    // Gloo's wait ends at the timeout with its own words ("Timed out waiting 2000ms ...")
    const bool timed_out = waited >= timeout_ || error.find("imed out") != std::string::npos;
    throw_collective_failure(
        {rank_, size(), name_, s.op, s.seq, s.bytes, timeout_, error, waited, timed_out}, *board_,
        members_);
  }

  template <class Issue>
  void run(const char* op, const torch::Tensor& data, Issue issue) {
    finish(start(op, data, issue));
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

  c10::intrusive_ptr<c10d::Store> root_;
  std::shared_ptr<seq_board> board_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::string name_;
  std::vector<int> members_;
  int world_rank_ = 0;
  int rank_ = 0;
  world_options times_;
  std::chrono::milliseconds timeout_;
  std::int64_t sequence_ = 0;
  bool broken_ = false;
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  MUSTER_CHECK(v && *v, errc::environment,
               "{} is not set: run the engine under `muster run` or `muster launch` (or set "
               "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does)",
               name);
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    MUSTER_THROW(errc::environment, "{}={} is not a number", name, v);
  }
}

}  // namespace

std::shared_ptr<communicator> make_world(const world_options& options) {
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE"), port = env_int("MASTER_PORT");
  const char* addr = std::getenv("MASTER_ADDR");
  MUSTER_CHECK(addr && *addr, errc::environment, "MASTER_ADDR is not set");
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(port);
  store_options.isServer = rank == 0;
  store_options.numWorkers = world;
  store_options.waitWorkers = false;
  store_options.timeout = options.connect_timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(addr, store_options);
  } catch (const std::exception& e) {
    MUSTER_THROW(errc::comm, "[rank {}/{}] cannot {} the rendezvous store at {}:{}{}: {}", rank,
                 world, rank == 0 ? "serve" : "reach", addr, port,
                 rank == 0 ? ""
                           : " (rank 0's process serves it: not started yet, or stuck before it; "
                             "rank 0's log says which)",
                 e.what());
  }
  // The board's own connection: its thread never shares a client with this one.
  c10d::TCPStoreOptions board_options = store_options;
  board_options.isServer = false;
  std::shared_ptr<seq_board> board;
  try {
    board = std::make_shared<seq_board>(c10::make_intrusive<c10d::TCPStore>(addr, board_options));
  } catch (const std::exception& e) {
    MUSTER_THROW(errc::comm, "[rank {}/{}] cannot reach the rendezvous store at {}:{}: {}", rank,
                 world, addr, port, e.what());
  }
  std::vector<int> all(static_cast<std::size_t>(world));
  std::iota(all.begin(), all.end(), 0);
  return std::make_shared<gloo_group>(store, std::move(board), "world", all, rank, options);
}

rendezvous rendezvous_of(communicator& world) {
  auto* gloo = dynamic_cast<gloo_group*>(&world);
  MUSTER_CHECK(gloo && gloo->name() == "world", errc::internal,
               "rendezvous_of needs the world group make_world() made");
  return {gloo->root(), gloo->board(), gloo->world_rank(), gloo->times()};
}

std::shared_ptr<communicator> make_group(communicator& world, const std::string& name,
                                         const std::vector<int>& ranks) {
  return world.subgroup(name, ranks);
}

}  // namespace muster::engine::comm
