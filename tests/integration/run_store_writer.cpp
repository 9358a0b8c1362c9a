// run_store_writer: the victim of test_run_store_sigkill. It opens a node file and writes to it
// in a loop, one transaction per iteration, until it is killed; it is not a tool for users.
//
//   run_store_writer <node-db> <first-step> <seed>
//
// Each iteration commits one of: a single step, a batch of up to 250 steps (x 4 ranks, so a
// kill most likely lands inside a long transaction), or an event. Right after the commit
// returns it prints one line and flushes:
//   S <step>   every step from <first-step> up to <step> is committed, for ranks 0..3
//   E <n>      event n (kind "tick", message "<first-step>/<n>") is committed
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/run_store.hpp"

namespace {

constexpr int kNumRanks = 4;

void report(char what, long long value) {
  std::printf("%c %lld\n", what, value);
  std::fflush(stdout);
}

void prepare(muster::store::node_writer& writer) {
  writer.put_run({"sigkill", "sigkill", muster::store::run_state::running, 1, 1, kNumRanks, 1,
                  std::nullopt, "", "", std::nullopt, std::nullopt});
  for (int rank = 0; rank < kNumRanks; ++rank) {
    writer.put_rank({rank, "victim", rank, 1, muster::store::rank_state::running, std::nullopt,
                     std::nullopt, 1});
  }
}

std::vector<muster::store::step_record> steps_for(long long first, long long count) {
  std::vector<muster::store::step_record> steps;
  for (long long step = first; step < first + count; ++step) {
    for (int rank = 0; rank < kNumRanks; ++rank) {
      steps.push_back({rank, step, 1.0 / static_cast<double>(step + 1), 4096, 0.5,
                       1ll << 30, step});
    }
  }
  return steps;
}

void write_forever(muster::store::node_writer& writer, const long long first, unsigned seed) {
  std::mt19937 random(seed);
  long long step = first;
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<long long> batch(2, 250);
  for (long long event = 0;;) {
    int k = kind(random);
    if (k < 2) {
      for (const auto& row : steps_for(step, 1)) writer.add_step(row);
      // Four commits: only after the last one is the whole step there.
      report('S', step++);
    } else if (k < 8) {
      long long count = batch(random);
      writer.add_steps(steps_for(step, count));
      step += count;
      report('S', step - 1);
    } else {
      writer.add_event({step, std::nullopt, muster::store::severity::info, "tick",
                        std::to_string(first) + "/" + std::to_string(event)});
      report('E', event++);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: run_store_writer <node-db> <first-step> <seed>\n");
    return 2;
  }
  try {
    muster::store::node_writer writer(argv[1]);
    prepare(writer);
    write_forever(writer, std::atoll(argv[2]), static_cast<unsigned>(std::atoll(argv[3])));
  } catch (const muster::error& e) {
    std::fprintf(stderr, "run_store_writer: %s\n", e.what());
    return 1;
  }
}
