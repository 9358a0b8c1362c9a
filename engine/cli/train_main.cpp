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
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/heartbeat_line.hpp"
#include "common/job_config.hpp"
#include "common/log.hpp"
#include "common/step_line.hpp"
#include "common/worker_error.hpp"
#include "engine/checkpoint/checkpoint_dirs.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "engine/comm/device_world.hpp"
#include "engine/data/job_documents.hpp"
#include "engine/train/device_choice.hpp"
#include "engine/train/device_memory.hpp"
#include "engine/train/step_profiler.hpp"
#include "engine/train/trainer.hpp"
#include "launcher/plan/job_plan.hpp"
#include "muster/version.hpp"

namespace {

// The signal that asked this rank to stop (SIGUSR1 or SIGTERM), or 0.
std::atomic<int> g_stop_signal{0};
// Whether the training loop acts on g_stop_signal yet (before it, a signal ends the process).
std::atomic<bool> g_stop_handled{false};

// A stop signal that a thread not blocking it took: one started before main, as OpenBLAS starts
// its pool when it is loaded (with OMP_NUM_THREADS above 1), before main can block anything.
// Without this handler the signal's default action ended the rank there, unsaved. It does what
// the sigwait thread below does, with async-signal-safe calls only.
extern "C" void on_stop_signal(int signal) {
  if (g_stop_handled.load()) {
    g_stop_signal.store(signal);
    return;
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  ::sigaction(signal, &fallback, nullptr);
  ::raise(signal);  // delivered, with its default action, when this handler returns
}

// SIGUSR1 and SIGTERM are blocked in every thread started from here on (LibTorch's, Gloo's,
// OpenMP's inherit the mask) and taken by one thread with sigwait, so no such thread is ever
// interrupted in a system call by them; a thread started before main still takes them, in
// on_stop_signal (SA_RESTART). Before the training loop takes over, a signal has its default
// action, as it would without this.
void watch_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  struct sigaction handler {};
  handler.sa_handler = on_stop_signal;
  handler.sa_flags = SA_RESTART;
  handler.sa_mask = set;  // one stop at a time
  ::sigaction(SIGUSR1, &handler, nullptr);
  ::sigaction(SIGTERM, &handler, nullptr);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      if (g_stop_handled.load()) {
        g_stop_signal.store(signal);
        continue;
      }
      std::signal(signal, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, signal);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      ::raise(signal);
    }
  }).detach();
}

using namespace muster;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The heartbeat line for the launcher ($MUSTER_HEARTBEAT_FILE): written beside and renamed over
// the file.
void beat(const heartbeat_progress& progress) {
  static const auto file = env("MUSTER_HEARTBEAT_FILE");
  if (file.empty()) return;
  const auto temp = file + ".tmp";
  std::ofstream(temp, std::ios::trunc) << format_heartbeat(progress);
  std::filesystem::rename(temp, file);
}

// The step's record for the run store, appended to $MUSTER_STEPS_FILE (the launcher copies it
// in batches, so the step never waits on SQLite).
void record(std::ofstream& steps, engine::train::memory_meter& memory,
            const engine::train::step_result& r) {
  if (!steps.is_open()) return;
  const auto m = memory.read();
  store::step_record s{0, r.step, r.loss, r.tokens, r.step_time_s, m.step_bytes, store::now_ms()};
  s.aux_loss = r.aux_loss;
  s.z_loss = r.z_loss;
  s.grad_norm = r.grad_norm;
  s.lr = r.lr;
  s.tokens_per_s = r.tokens_per_s;
  s.mfu = r.mfu;
  s.peak_mem_bytes = m.peak_bytes;
  s.mem_device = m.device;
  s.comm_wait_s = r.comm_wait_s;
  steps << format_step_line(s);
  steps.flush();
}

// What kind of failure an exception is, for the run store's errors (common/worker_error.hpp).
std::string kind_of(const std::exception& e) {
  const std::string_view what = e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e) || what.find("out of memory") != what.npos ||
      what.find("can't allocate memory") != what.npos)
    return "oom";
  if (const auto* m = dynamic_cast<const muster::error*>(&e)) {
    if (m->category() == errc::config || m->category() == errc::invalid_input) return "bad_input";
    // "timed out after N ms" (engine/comm/laggards.cpp); a failure before it says
    // "failed after N ms (timeout M ms)", and is no timeout
    if (m->category() == errc::comm)
      return what.find(" timed out after ") != what.npos ? "collective_timeout"
                                                         : "collective_error";
  }
  return "exception";
}

// The job being trained, once loaded: what an out-of-memory message proposes to change.
std::optional<job_config> g_job;

// What to change for memory, less what the job already does: "shard more (...), add ranks, ...".
// Before the first step (the model built, a checkpoint loaded) only the parameters and the
// optimizer's state are held: the batch and recompute do not matter then.
std::string memory_changes(bool before_steps, bool on_gpu) {
  std::vector<std::string> out;
  const bool known = g_job.has_value();
  if (!known || g_job->parallel.sharding != "optim_grads_params")
    out.push_back("shard more (parallel.sharding = \"optim_grads_params\")");
  if (before_steps) {
    out.push_back(on_gpu ? "add ranks" : "add nodes (the ranks of a node share its host memory)");
    out.push_back("train a smaller model");
    return fmt::format(
        "before any step, so the parameters and optimizer state alone do not "
        "fit (no batch yet): {}",
        fmt::join(out, " or "));
  }
  out.push_back("add ranks");
  // as diagnose proposes them (launcher/diagnose/explain.cpp): a packed row's size, the rows
  if (known && g_job->train.max_tokens_per_pack > 0)
    out.push_back(
        fmt::format("lower train.max_tokens_per_pack (now {})", g_job->train.max_tokens_per_pack));
  if (!known || g_job->train.micro_batch_size > 1)
    out.push_back(
        known ? fmt::format("lower train.micro_batch_size (now {})", g_job->train.micro_batch_size)
              : "lower train.micro_batch_size");
  if (!known || g_job->train.recompute != "full")
    out.push_back(known && g_job->train.recompute == "none"
                      ? "set train.recompute = \"selective\" (or \"full\")"
                      : "set train.recompute = \"full\"");
  std::string text;
  for (std::size_t i = 0; i < out.size(); ++i)
    text += (i == 0 ? "" : i + 1 == out.size() ? " or " : ", ") + out[i];
  return text;
}

// The message of an exception for people: LibTorch's without its C++ backtrace, and an
// out-of-memory one with what to change (`before_steps`: see memory_changes).
std::string message_of(const std::exception& e, bool before_steps) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10 ? c10->what_without_backtrace() : e.what();
  if (kind_of(e) == "oom")
    text += "; this rank ran out of memory: `muster plan JOB.toml` shows what each rank holds; " +
            memory_changes(before_steps, text.find("CUDA") != std::string::npos);
  return text;
}

// The failure's message, as the first place that caught it said it: with the trainer, which
// knows whether a step had begun (its error step), or without one, at startup.
std::optional<std::string> g_failure_text;
const std::string& failure_text(const std::exception& e, const engine::train::trainer* trainer) {
  if (!g_failure_text)
    g_failure_text = message_of(
        e, !trainer || std::string_view(trainer->phase()) == "startup" || !trainer->error_step());
  return *g_failure_text;
}

// Whether this rank's error file is written (the first failure's, with its phase, wins).
bool g_error_written = false;

// torchelastic's error file with the phase and step, which the launcher reads back and records
// when this rank fails. Without a trainer: a failure at startup.
void write_error_file(const std::exception& e, const engine::train::trainer* trainer) {
  const auto& text = failure_text(e, trainer);  // said once, where the trainer knows its phase
  const auto file = env("TORCHELASTIC_ERROR_FILE");
  if (file.empty() || g_error_written) return;
  worker_error w{text, "startup", kind_of(e), std::nullopt, store::now_ms()};
  if (trainer) {
    w.phase = trainer->phase();
    if (const auto step = trainer->error_step(); step && *step >= 0) w.step = *step;
  }
  std::ofstream(file) << format_worker_error(w);
  g_error_written = true;
}

int run(engine::train::trainer& trainer, const job_config& config);

// The exit code of a failure: 2 for bad input (the job file, an override), else 1.
int exit_code_of(const std::exception& e) {
  const auto* m = dynamic_cast<const muster::error*>(&e);
  return m && (m->category() == errc::config || m->category() == errc::invalid_input) ? 2 : 1;
}

// The collectives' timeout from comm.timeout; connecting waits as long as the launcher's
// rendezvous does.
engine::comm::world_options world_options_of(const job_config& config) {
  engine::comm::world_options o;
  o.timeout = std::chrono::seconds(config.comm.timeout);
  o.connect_timeout =
      std::chrono::seconds(std::max(config.launch.timeout_rendezvous, config.comm.timeout));
  return o;
}

constexpr const char* kUsage =
    "usage: muster-train [JOB.toml] [key=value ...]\n"
    "\n"
    "muster's built-in engine: trains the job's MoE transformer (FSDP-style sharding, expert\n"
    "parallelism) as one rank of `muster run` or `muster launch`, which start it with RANK,\n"
    "WORLD_SIZE, MASTER_ADDR/PORT and MUSTER_RUN_DIR set. Run by hand it is one rank alone.\n"
    "  JOB.toml      the job file (default: $MUSTER_RUN_DIR/job.toml, written by the launcher)\n"
    "  key=value     a job-file override, e.g. train.steps=20 train.device=cuda\n"
    "  -h, --help    this text; --version: the version\n"
    "Each step it logs a line (loss, tokens/s, MFU) and writes $MUSTER_HEARTBEAT_FILE and\n"
    "$MUSTER_STEPS_FILE for the launcher; SIGUSR1 or SIGTERM saves a checkpoint and stops.\n"
    "exit codes: 0 done, 1 a failure, 2 bad input (job file, override), 128+N stopped by signal N\n"
    "example: muster run etc/examples/tiny-moe.toml\n";

int train(int argc, char** argv) {
  std::filesystem::path job_file;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    }
    if (a == "--version") {
      fmt::print("muster-train {} (git {})\n", muster::kVersion, muster::kGitCommit);
      return 0;
    }
    if (a.find('=') != std::string::npos)
      overrides.push_back(a);
    else
      job_file = a;
  }
  if (job_file.empty() && !env("MUSTER_RUN_DIR").empty())
    job_file = std::filesystem::path(env("MUSTER_RUN_DIR")) / "job.toml";
  const auto loaded = load_job_config(job_file, overrides);
  const auto& config = loaded.config;
  g_job = config;
  // Freed activations stay in the heap for the next step instead of going back to the kernel
  // and faulting in again, zeroed (about a tenth of a CPU step at 4 x 256 tokens).
  ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
  ::mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  log::setup(config.log.level);
  const auto world = env("WORLD_SIZE").empty() ? 1 : std::stoi(env("WORLD_SIZE"));
  {  // the layout on this world, its errors naming the job file's lines (run by hand too)
    launcher::plan::plan_request request;
    request.world = launcher::plan::world_size{
        world, env("WORLD_SIZE").empty() ? "one rank: WORLD_SIZE is not set" : "WORLD_SIZE"};
    std::vector<std::string> warnings;
    launcher::plan::checked_layout(config, loaded.where, request, warnings);
  }
  if (!env("OMP_NUM_THREADS").empty()) torch::set_num_threads(std::stoi(env("OMP_NUM_THREADS")));
  auto documents = engine::data::open_job_documents(config);
  // Gloo on the CPU, NCCL on a GPU (train.device)
  engine::train::trainer trainer(
      config, std::move(documents),
      world > 1 ? engine::comm::make_device_world(engine::train::training_device(config.train),
                                                  world_options_of(config), config.comm.nccl_ub)
                : nullptr);
  try {
    return run(trainer, config);
  } catch (const std::exception& e) {
    write_error_file(e, &trainer);
    // A failed collective may leave a group's thread blocked on a peer that never comes, which
    // the trainer's destructors would wait for: say the failure and leave now, as NCCL's
    // watchdog does, so the launcher sees the end.
    fmt::print(stderr, "muster-train: {}\n", failure_text(e, &trainer));
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
    std::fflush(nullptr);
    std::_Exit(exit_code_of(e));
  }
}

// Loads a checkpoint when there is one, then trains to train.steps, saving as configured.
int run(engine::train::trainer& trainer, const job_config& config) {
  auto logger = log::get("engine");
  logger->info("MFU of {:.3g} training FLOPs per token against {:.3g} TFLOP/s per rank ({})",
               trainer.flops_per_token(), trainer.peak_tflops(), trainer.peak_source());
  if (config.train.warmup_steps > config.train.steps && config.train.steps > 0)
    logger->warn(
        "train.warmup_steps = {} is above train.steps = {}: the learning rate rises through "
        "every step and never reaches train.lr = {:g}; lower warmup_steps for a short run",
        config.train.warmup_steps, config.train.steps, config.train.lr);
  const auto& t = config.train;
  logger->info("a step: global batch {} = micro-batch {} x accumulation {} x data-parallel {}{}",
               t.micro_batch_size * trainer.grad_accum_steps() * trainer.dp_size(),
               t.micro_batch_size, trainer.grad_accum_steps(), trainer.dp_size(),
               t.global_batch_size > 0 ? " (from train.global_batch_size)" : "");
  {  // how much data there is against what the run reads: a small set is gone over again
    const auto& docs = trainer.documents();
    std::int64_t tokens = 0;
    for (std::int64_t d = 0; d < docs.num_documents(); ++d) tokens += docs.document_length(d);
    const auto rows = trainer.rows_per_epoch();
    const double step_rows =
        double(t.micro_batch_size) * trainer.grad_accum_steps() * trainer.dp_size();
    const double epochs = step_rows * t.steps / double(std::max<std::int64_t>(rows, 1));
    logger->info(
        "data: {}: {} documents, {} tokens, {} rows of {} tokens an epoch; {} steps of {} rows "
        "read {}",
        docs.describe(), docs.num_documents(), tokens, rows,
        t.max_tokens_per_pack > 0 ? t.max_tokens_per_pack : t.seq_length, t.steps, step_rows,
        epochs >= 1 ? fmt::format("it {:.2f} times{}", epochs,
                                  epochs > 1 ? " (each epoch in a new order)" : "")
                    : fmt::format("{:.2g}% of it", 100 * epochs));
  }
  const auto held = trainer.held();
  logger->info("held by this rank ({}): params {} B | grads {} B | optimizer {} B",
               config.parallel.sharding, held.params, held.grads, held.optimizer);
  // Checkpoints: resume from checkpoint.load, or the newest under the checkpoint directory.
  // The launcher's run directory, or the working directory when run by hand.
  const auto run_dir = env("MUSTER_RUN_DIR").empty() ? std::filesystem::path(".")
                                                     : std::filesystem::path(env("MUSTER_RUN_DIR"));
  const auto root = engine::checkpoint::checkpoint_root(config, run_dir);
  auto from = engine::checkpoint::newest_checkpoint(root);
  if (const std::filesystem::path load = config.checkpoint.load; !load.empty()) {
    // a checkpoint root (the folder step-N directories are in) stands for its newest; the job's
    // own checkpoint.dir with none yet (a first run) for none
    const auto found = engine::checkpoint::checkpoint_to_load(load);
    const bool own_dir = engine::checkpoint::same_dir(load, root);
    from = found || !own_dir ? found.value_or(load) : std::optional<std::filesystem::path>();
    if (from && *from != load)
      logger->info("checkpoint.load = {} holds step directories: loading the newest, {}",
                   load.string(), from->string());
    else if (!from)
      logger->info(
          "checkpoint.load = {} (checkpoint.dir) holds no checkpoint yet: training "
          "from step 1",
          load.string());
  }
  if (from) {
    trainer.load(*from);
    // the progress the checkpoint brings, for `muster status` before (or without) a step
    beat({trainer.next_step(), config.train.steps, std::nullopt, std::nullopt});
    if (trainer.next_step() == 0)
      logger->info(
          "loaded the weights of {} (no trainer_state.json: no optimizer state nor "
          "step), training from step 1",
          from->string());
    else if (trainer.next_step() >= config.train.steps)
      logger->warn(
          "loaded checkpoint {}: it is at step {}, and train.steps = {} are done already; "
          "nothing to train: raise train.steps to train on",
          from->string(), trainer.next_step(), config.train.steps);
    else
      logger->info("loaded checkpoint {}: continuing at step {}{}", from->string(),
                   trainer.next_step() + 1,
                   config.checkpoint.load_optim
                       ? ""
                       : " with a fresh optimizer state (checkpoint.load_optim = false)");
    if (const auto change = engine::checkpoint::schedule_change(*from, config.train))
      logger->warn("{}", *change);
    if (trainer.row_offset() != 0)
      logger->info(
          "the checkpoint's steps read {} data rows, at another global batch than this run's "
          "{}: the data goes on after them, so no row is read twice or skipped",
          trainer.row_offset() + std::int64_t{trainer.next_step()} * trainer.rows_per_step(),
          trainer.rows_per_step());
  }
  g_stop_handled.store(true);
  auto save = [&] {
    const auto dir = trainer.save(root, config.checkpoint.keep);
    logger->info("saved checkpoint {} after step {}", dir.string(), trainer.next_step());
  };
  // What reporting a step costs the step (the heartbeat and the run-store line; the launcher
  // stores the lines from another process), against the steps' own time.
  double report_s = 0, steps_s = 0;
  int reported = 0;
  std::ofstream steps;
  if (!env("MUSTER_STEPS_FILE").empty()) steps.open(env("MUSTER_STEPS_FILE"), std::ios::app);
  engine::train::memory_meter memory(trainer.device());
  engine::train::step_profiler profile(
      config.train.profile_step_start, config.train.profile_step_end, run_dir / "profile",
      env("RANK").empty() ? 0 : std::stoi(env("RANK")), trainer.device().is_cuda());
  auto log_profile = [&](const std::string& profiled) {
    if (!profiled.empty()) logger->info("{}", profiled);
  };
  bool said_mfu_over = false;
  while (trainer.next_step() < config.train.steps) {
    if (g_stop_signal.load() != 0) trainer.request_stop();
    profile.before_step(trainer.next_step() + 1);
    const auto r = trainer.step();
    log_profile(profile.after_step(r.step + 1));
    const auto report_start = std::chrono::steady_clock::now();
    beat({r.step + 1, config.train.steps, r.loss, r.tokens_per_s});
    record(steps, memory, r);
    report_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - report_start).count();
    steps_s += r.step_time_s;
    ++reported;
    logger->info(
        "step {}/{} | loss {:.6f} | aux {:.4f} | z {:.4f} | lr {:.2e} | grad norm {:.3f} | "
        "{:.0f} tok/s | MFU {:.1f}%",
        r.step + 1, config.train.steps, r.loss, r.aux_loss, r.z_loss, r.lr, r.grad_norm,
        r.tokens_per_s, 100 * r.mfu);
    // above 100%: the peak it is taken of is too low (measured while other work shared the
    // device, or set so), said once
    if (r.mfu > 1 && !said_mfu_over) {
      said_mfu_over = true;
      const bool set = config.train.peak_tflops > 0;
      logger->warn(
          "MFU {:.1f}% is above 100%: the peak it is taken of, {:.3g} TFLOP/s ({}), is below "
          "what this rank does{}; set train.peak_tflops to the hardware's peak for MFU figures "
          "to compare",
          100 * r.mfu, trainer.peak_tflops(), trainer.peak_source(),
          set ? ""
              : fmt::format(" (measured while other work shared the {}?)",
                            trainer.device().is_cuda() ? "GPU" : "CPUs"));
    }
    const int interval = config.checkpoint.interval;
    if (r.stop) {
      // Asked to stop (Slurm's pre-timeout SIGUSR1, or SIGTERM): save, then end as signalled.
      log_profile(profile.finish(r.step + 1));
      save();
      const int signal = g_stop_signal.load() != 0 ? g_stop_signal.load() : SIGTERM;
      logger->info("stopping after step {} ({})", r.step + 1, strsignal(signal));
      return 128 + signal;
    }
    if ((interval > 0 && trainer.next_step() % interval == 0) ||
        (interval >= 0 && trainer.next_step() == config.train.steps))
      save();
  }
  log_profile(profile.finish(trainer.next_step()));
  logger->info(
      "gathered at once: at most {} B of parameters and whole gradients; FSDP buffers kept: {} B",
      trainer.peak_transient_bytes(), trainer.collective_buffer_bytes());
  if (reported > 0)
    logger->info(
        "reporting to the launcher (heartbeat, run-store line): {:.1f} us a step, "
        "{:.3f}% of the mean step time",
        1e6 * report_s / reported, 100 * report_s / std::max(steps_s, 1e-9));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  watch_stop_signals();
  try {
    return train(argc, argv);
  } catch (const muster::error& e) {
    fmt::print(stderr, "muster-train: {}\n", e.what());
    write_error_file(e, nullptr);
    return exit_code_of(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "muster-train: {}\n", failure_text(e, nullptr));
    write_error_file(e, nullptr);
    return 1;
  }
}
