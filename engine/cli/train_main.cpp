// muster-train: the built-in engine, as a worker of `muster run` / `muster launch`.
//
//   muster-train [JOB.toml] [key=value ...]
//
// Without JOB.toml it reads $MUSTER_RUN_DIR/job.toml (the launcher writes the resolved job
// there). Each step it logs one line, writes its progress line to $MUSTER_HEARTBEAT_FILE (the
// launcher's hang detection and progress line read it), appends its record to
// $MUSTER_STEPS_FILE (the launcher copies it to the run store), and on a failure writes the message
// to $TORCHELASTIC_ERROR_FILE for the launcher to report. Exit codes: 0 done, 1 a failure,
// 2 bad input.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/job_config.hpp"
#include "common/error.hpp"
#include "common/heartbeat_line.hpp"
#include "common/step_line.hpp"
#include "common/log.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "engine/train/trainer.hpp"

namespace {

// The signal that asked this rank to stop (SIGUSR1 or SIGTERM), or 0.
volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int signal) { g_stop_signal = signal; }

using namespace muster;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The heartbeat line for the launcher: written beside and renamed over the file.
void beat(const std::string& file, const engine::train::step_result& r, int steps) {
  if (file.empty()) return;
  const auto temp = file + ".tmp";
  std::ofstream(temp, std::ios::trunc)
      << format_heartbeat({r.step + 1, steps, r.loss, r.tokens_per_s});
  std::filesystem::rename(temp, file);
}

// This process's resident memory (the CPU's stand-in for device memory), from /proc.
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// The step's record for the run store, appended to $MUSTER_STEPS_FILE (the launcher copies it).
void record(std::ofstream& steps, const engine::train::step_result& r) {
  if (!steps.is_open()) return;
  steps << format_step_line({0, r.step, r.loss, r.tokens, r.step_time_s, resident_bytes(),
                             store::now_ms()});
  steps.flush();
}

// torchelastic's error file, which the launcher reads back when this rank fails.
void write_error_file(const std::string& message) {
  const auto file = env("TORCHELASTIC_ERROR_FILE");
  if (file.empty()) return;
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c == '\n' ? ' ' : c;
  }
  std::ofstream(file) << R"({"message": {"message": ")" << escaped << R"(", "extraInfo": {}}})";
}

int train(int argc, char** argv) {
  std::filesystem::path job_file;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.find('=') != std::string::npos) overrides.push_back(a);
    else job_file = a;
  }
  if (job_file.empty() && !env("MUSTER_RUN_DIR").empty())
    job_file = std::filesystem::path(env("MUSTER_RUN_DIR")) / "job.toml";
  const auto config = load_job_config(job_file, overrides).config;
  log::setup(config.log.level);
  const auto world = env("WORLD_SIZE").empty() ? 1 : std::stoi(env("WORLD_SIZE"));
  if (!env("OMP_NUM_THREADS").empty()) torch::set_num_threads(std::stoi(env("OMP_NUM_THREADS")));
  std::vector<std::filesystem::path> paths(config.data.paths.begin(), config.data.paths.end());
  auto documents = engine::data::open_documents(config.data.format, paths);
  engine::train::trainer trainer(config, std::move(documents),
                                 world > 1 ? engine::comm::make_world() : nullptr);
  auto logger = log::get("engine");
  const auto held = trainer.held();
  logger->info("held by this rank ({}): params {} B | grads {} B | optimizer {} B",
               config.parallel.sharding, held.params, held.grads, held.optimizer);
  // Checkpoints: resume from checkpoint.load, or the newest under the checkpoint directory.
  const std::filesystem::path root =
      !config.checkpoint.dir.empty()  ? std::filesystem::path(config.checkpoint.dir)
      : !env("MUSTER_RUN_DIR").empty() ? std::filesystem::path(env("MUSTER_RUN_DIR")) / "checkpoints"
                                       : std::filesystem::path("checkpoints");
  const auto from = !config.checkpoint.load.empty()
                        ? std::optional<std::filesystem::path>(config.checkpoint.load)
                        : engine::checkpoint::newest_checkpoint(root);
  if (from) {
    trainer.load(*from);
    logger->info("loaded checkpoint {}: continuing at step {}", from->string(),
                 trainer.next_step() + 1);
  }
  std::signal(SIGUSR1, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  auto save = [&] {
    const auto dir = trainer.save(root, config.checkpoint.keep);
    logger->info("saved checkpoint {} after step {}", dir.string(), trainer.next_step());
  };
  const auto heartbeat = env("MUSTER_HEARTBEAT_FILE");
  std::ofstream steps;
  if (!env("MUSTER_STEPS_FILE").empty()) steps.open(env("MUSTER_STEPS_FILE"), std::ios::app);
  while (trainer.next_step() < config.train.steps) {
    if (g_stop_signal != 0) trainer.request_stop();
    const auto r = trainer.step();
    beat(heartbeat, r, config.train.steps);
    record(steps, r);
    logger->info("step {}/{} | loss {:.6f} | aux {:.4f} | z {:.4f} | lr {:.2e} | grad norm {:.3f} | "
                 "{:.0f} tok/s",
                 r.step + 1, config.train.steps, r.loss, r.aux_loss, r.z_loss, r.lr, r.grad_norm,
                 r.tokens_per_s);
    const int interval = config.checkpoint.interval;
    if (r.stop) {
      // Asked to stop (Slurm's pre-timeout SIGUSR1, or SIGTERM): save, then end as signalled.
      save();
      const int signal = g_stop_signal != 0 ? static_cast<int>(g_stop_signal) : SIGTERM;
      logger->info("stopping after step {} ({})", r.step + 1, strsignal(signal));
      return 128 + signal;
    }
    if (interval > 0 && (trainer.next_step() % interval == 0 || trainer.next_step() == config.train.steps))
      save();
  }
  logger->info("gathered at once: at most {} B of parameters and whole gradients",
               trainer.peak_transient_bytes());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const muster::error& e) {
    fmt::print(stderr, "muster-train: {}\n", e.what());
    write_error_file(e.what());
    return e.category() == muster::errc::config || e.category() == muster::errc::invalid_input ? 2 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "muster-train: {}\n", e.what());
    write_error_file(e.what());
    return 1;
  }
}
