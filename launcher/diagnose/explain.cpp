// What a finding means for people: see explain.hpp.
#include "launcher/diagnose/explain.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include "common/byte_size.hpp"
#include "common/job_config.hpp"
#include "launcher/supervisor.hpp"

namespace muster::launcher::diagnose {
namespace {

std::string fact(const finding& f, const char* key) {
  const auto it = f.facts.find(key);
  return it == f.facts.end() ? "" : it->second;
}

// " (text)" when text is not empty.
std::string aside(const std::string& text) {
  return text.empty() ? "" : " (" + text + ")";
}

std::string ranks_of(const finding& f) {
  std::string out = f.ranks.empty() ? std::string("rank unknown")
                                    : fmt::format("rank {}", fmt::join(f.ranks, ", "));
  if (!f.hosts.empty()) out += fmt::format(" on {}", fmt::join(f.hosts, ", "));
  return out;
}

// "0-3, 5, 7-4095" for ascending ranks, at most 16 ranges (then "...").
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  int shown = 0;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (++shown > 16) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") +
           (i == j ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

void memory(finding& f) {
  const auto ranks = ranks_of(f);
  if (f.category == "nccl_oom") {
    f.summary = fmt::format(
        "NCCL could not allocate GPU memory on {}{}", ranks,
        aside(fact(f, "bytes").empty() ? fact(f, "call") : fact(f, "bytes") + " bytes"));
    f.fixes = {
        "leave room for NCCL's buffers: lower train.micro_batch_size or "
        "train.max_tokens_per_pack one step (Megatron --micro-batch-size)",
        "NVLink SHARP buffers take GPU memory on NVSwitch systems: NCCL_NVLS_ENABLE=0",
        "smaller NCCL buffers: NCCL_BUFFSIZE (4 MiB per channel and peer by default) and "
        "NCCL_MAX_NCHANNELS"};
    return;
  }
  const auto phase = fact(f, "phase");
  f.summary = fmt::format("CUDA out of memory on {} (GPU {}): tried to allocate {} of {}{}{}",
                          ranks, fact(f, "gpu").empty() ? "?" : fact(f, "gpu"),
                          fact(f, "tried_to_allocate").empty() ? "?" : fact(f, "tried_to_allocate"),
                          fact(f, "capacity").empty() ? "?" : fact(f, "capacity"),
                          fact(f, "free").empty() ? "" : fmt::format(", {} free", fact(f, "free")),
                          phase.empty() ? "" : fmt::format(", in {}", phase));
  if (!fact(f, "other_processes").empty())
    f.fixes.push_back(
        fmt::format("other processes hold memory on that GPU ({}): find and stop them (nvidia-smi, "
                    "muster node preflight) before shrinking the model",
                    fact(f, "other_processes")));
  if (phase == "startup" || phase == "checkpoint")
    f.fixes.push_back(
        "the OOM is at load time: build the model on the meta device and materialise only this "
        "rank's shards (muster does; Megatron-FSDP --init-model-with-meta-device)");
  // the job's own settings, where its program read the job file: what it does already is no fix
  const auto packs = fact(f, "train.max_tokens_per_pack"),
             micro = fact(f, "train.micro_batch_size");
  if (packs.empty())
    f.fixes.push_back(
        "with packing, lower train.max_tokens_per_pack; without it, lower "
        "train.micro_batch_size (Megatron --micro-batch-size)");
  if (!packs.empty() && packs != "0")
    f.fixes.push_back(fmt::format("lower train.max_tokens_per_pack (now {})", packs));
  if (!packs.empty() && micro != "1")
    f.fixes.push_back(fmt::format("lower train.micro_batch_size (now {})", micro));
  f.fixes.push_back(
      "at micro batch 1, raise parallel.context (Megatron --context-parallel-size), a power "
      "of two not above the GPUs per node");
  if (fact(f, "train.recompute") != "full")
    f.fixes.push_back(
        "train.recompute = \"full\" (Megatron --recompute-granularity full "
        "--recompute-method uniform)");
  if (fact(f, "parallel.sharding") != "optim_grads_params")
    f.fixes.push_back(
        "a stronger sharding: parallel.sharding = \"optim_grads_params\" (Megatron-FSDP "
        "--data-parallel-sharding-strategy optim_grads_params)");
  if (!fact(f, "reserved_unallocated").empty())
    f.fixes.push_back(
        fmt::format("{} is reserved but unallocated (fragmentation): "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, unless comm.nccl_ub is on",
                    fact(f, "reserved_unallocated")));
  if (!fact(f, "planned").empty())
    f.fixes.push_back(
        fmt::format("the planner estimated {} a GPU for this job: muster plan "
                    "shows the terms and the changes that fit",
                    fact(f, "planned")));
}

void collective(finding& f, const explain_context& context) {
  const auto ranks = ranks_of(f);
  if (f.category == "hang_watchdog_stuck") {
    if (fact(f, "source") == "muster") {
      // every rank of the world hung at once: none waited on another that went on
      const bool all =
          context.world_size > 0 && static_cast<int>(f.ranks.size()) >= context.world_size;
      f.summary = fmt::format(
          "{} hung: {} and muster's hang detection stopped {}{}{}", ranks,
          f.ranks.size() > 1 ? "their heartbeats stopped" : "its heartbeat stopped",
          f.ranks.size() > 1 ? "them" : "it",
          all ? "; every rank stopped at once: a collective none finished, or data, a file "
                "system or a GPU that stalled them all"
          : !f.waited_ranks.empty()
              ? fmt::format("; {} outside any collective while {} {} waited in {} (their stacks)",
                            f.ranks.size() > 1 ? "they stood" : "it stood",
                            f.waited_ranks.size() > 1 ? "ranks" : "rank",
                            fmt::join(f.waited_ranks, ", "),
                            f.waited_ranks.size() > 1 ? "theirs" : "one")
              : "; the other ranks waited on it",
          fact(f, "stood_at").empty() ? ""
                                      : fmt::format("; rank {} stood at {}",
                                                    fact(f, "stood_at_rank"), fact(f, "stood_at")));
      if (fact(f, "stopped") == "true") {
        f.summary = fmt::format(
            "{} hung: {} process was stopped (SIGSTOP or a debugger) and the other ranks "
            "waited on it in their collectives; muster's hang detection ended them",
            ranks, f.ranks.size() > 1 ? "their" : "its");
        f.fixes = {
            "find what stopped it: a debugger attached (gdb, a py-spy that is not "
            "--nonblocking), a kill -STOP, a ^Z in the terminal of a rank started by hand; "
            "a stopped rank holds every collective of the run",
            "detach the debugger (or kill -CONT it) within the hang limit "
            "(launch.timeout_hang; muster-train's is at least comm.timeout + 60 s), or raise it "
            "while you debug"};
        return;
      }
      f.fixes = {
          "read that rank's log and stack (launch.hang_dump = true sends SIGABRT: a Python "
          "rank dumps every thread's stack into its log, muster sets PYTHONFAULTHANDLER=1 for "
          "it; a C++ rank leaves a core where ulimit -c allows; py-spy dump --pid while it "
          "hangs): data loading, a collective only some ranks call, a dead GPU",
          "raise launch.timeout_hang only when a step is legitimately that long"};
    } else {
      f.summary = fmt::format(
          "ProcessGroupNCCL's watchdog got stuck{} on {}: a CUDA or NCCL "
          "call is hung",
          fact(f, "stuck_s").empty() ? "" : " for " + fact(f, "stuck_s") + " s", ranks);
      f.fixes = {
          "find the rank whose collective never started: TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
          "with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 writes the flight recorder of each rank",
          "if the watchdog is only slow, raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC "
          "(TORCH_NCCL_ENABLE_MONITORING=0 turns the monitor off)"};
    }
    return;
  }
  // a group that did not form: the ranks' connecting to each other, before any collective
  const bool connect = fact(f, "op") == "connect" && fact(f, "seq").empty();
  std::string missing;
  if (connect && !fact(f, "not_arrived").empty())
    missing = fmt::format("; never joined: {}", fact(f, "not_arrived"));
  else if (context.world_size > 0 && !f.ranks.empty() && f.category == "nccl_timeout") {
    std::vector<int> silent;
    for (int r = 0; r < context.world_size; ++r)
      if (!f.ranks.contains(r) && !context.timed_out.contains(r)) silent.push_back(r);
    if (!silent.empty()) missing = fmt::format("; rank {} did not report", rank_ranges(silent));
  }
  if (missing.empty() && !fact(f, "not_arrived").empty())
    missing = fmt::format("; not arrived: {}", fact(f, "not_arrived"));
  std::string progress;
  if (!fact(f, "last_completed").empty())
    progress = fmt::format(" (last enqueued {}, last completed {})", fact(f, "last_enqueued"),
                           fact(f, "last_completed"));
  const auto or_unknown = [&](const char* key) {
    return fact(f, key).empty() ? std::string("?") : fact(f, key);
  };
  // the engine's collective that failed before its timeout: a connection, not a wait
  const bool failed_early = !fact(f, "failed_ms").empty();
  const auto how = failed_early ? fmt::format("failed after {} ms", fact(f, "failed_ms"))
                                : fmt::format("timed out after {} ms", or_unknown("timeout_ms"));
  const auto before =
      failed_early ? fmt::format(", before its {} ms timeout", or_unknown("timeout_ms")) : "";
  const auto error = fact(f, "error").empty() ? "" : "; the error: " + fact(f, "error");
  // Gloo names the transfer it waited on (recv, send), not the collective or its number
  const auto what =
      fact(f, "backend") == "gloo" ? fmt::format("a collective's Gloo {}", or_unknown("op"))
      : connect                    ? fmt::format("the {} group's connect", or_unknown("group"))
                : fmt::format("collective {} seq {}", or_unknown("op"), or_unknown("seq"));
  f.summary =
      fmt::format("{}{} {} on {}{}{}{}{}", f.category == "nccl_timeout_cascade" ? "knock-on: " : "",
                  what, how, ranks, before, progress, missing, error);
  if (f.category == "nccl_timeout_cascade")
    f.fixes.push_back("fix the root cause above: these ranks waited on a rank that had failed");
  else if (connect && !failed_early)
    f.fixes = {
        "the ranks that never joined: their logs say where they stood (still "
        "starting: a slow import, a container start, data or a checkpoint loading; or stuck "
        "before the engine's rendezvous)",
        "raise comm.timeout (muster-train waits for the ranks as long as the larger of it and "
        "launch.timeout_rendezvous) only when a start is legitimately that long"};
  else if (failed_early)
    f.fixes = {
        "a peer's end of the collective went away: find the rank that died first (muster "
        "status RUN names the first failure; its log, dmesg -T for the OOM killer)",
        "with no rank dead, the network between the ranks: NCCL_DEBUG=INFO, and "
        "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME naming an interface every node has"};
  else
    f.fixes = {
        "look at the ranks that did not report the timeout: the usual culprits (hung in "
        "data loading, a different code path, a dead GPU)",
        "raise comm.timeout only when a step is legitimately that long (torch "
        "init_process_group(timeout=...), Megatron --distributed-timeout-minutes)"};
}

// A task srun killed after it ended the step on another task's end (--kill-on-bad-exit).
constexpr const char* kAfterSrunEndedStep = ", after srun ended the step (--kill-on-bad-exit)";
constexpr const char* kSrunEndedStepFix =
    "srun ended the step when another task ended first: fix that one (the root above)";

// muster's launcher on a node, as srun saw it end (diagnoser::srun_tasks): it ends when its
// ranks do, or on its own error, which its last "muster: " line says.
void launcher(finding& f) {
  const auto code = fact(f, "exit_code");
  const auto signal = fact(f, "signal") == "9" ? "SIGKILL" : fact(f, "signal_name");
  const auto said = fact(f, "launcher_said");
  const auto tasks = fact(f, "srun_tasks");
  const auto which =
      f.hosts.size() > 1
          ? fmt::format("s on {}", fmt::join(f.hosts, ", "))
          : fmt::format("{} (srun task{} {})", f.hosts.empty() ? "" : " on " + *f.hosts.begin(),
                        tasks.find_first_of(",-") == std::string::npos ? "" : "s", tasks);
  f.summary = fmt::format("muster's launcher{} {}{}{}", which,
                          !code.empty()     ? "exited with exit code " + code
                          : !signal.empty() ? "ended: " + signal
                                            : "failed",
                          fact(f, "srun_ended_step").empty() ? "" : kAfterSrunEndedStep,
                          said.empty() ? "" : "; its last line: " + said);
  if (!fact(f, "srun_ended_step").empty()) {
    f.fixes = {kSrunEndedStepFix};
    return;
  }
  f.fixes = {
      "a launcher ends when its ranks do: where a finding above names a rank, fix that first",
      said.empty() ? "else read its own lines before srun's in the job's output (srun -l labels "
                     "each line with its task)"
                   : "else its last line above says why (a job file, a command line or the "
                     "environment it refused: fix that input and submit again)"};
  if (!fact(f, "signal").empty())
    f.fixes.push_back(
        "a launcher killed by a signal: Slurm's time limit or scancel (sacct -j <job> shows the "
        "state), or the kernel's OOM killer (dmesg -T | grep -i -E 'killed process|oom')");
}

// "signal 11 (SIGSEGV)" for "11"; "signal 77" for a number without a name.
std::string signal_text(const std::string& number) {
  const int n = std::atoi(number.c_str());
  const auto name = n > 0 ? signal_name(n) : std::string();
  return name.starts_with("SIG") ? fmt::format("signal {} ({})", n, name) : "signal " + number;
}

// What to do about a rank a signal ended (not SIGKILL, which worker_killed_sigkill says).
std::string crash_advice(const std::string& number) {
  const int n = std::atoi(number.c_str());
  const std::string where =
      "its log has the Python stack where faulthandler is on (python3 -X faulthandler, or "
      "PYTHONFAULTHANDLER=1; torchrun and muster-train turn it on), else a core dump (ulimit -c "
      "unlimited) read with gdb";
  switch (n) {
    case SIGSEGV:
      return "a crash in native code (a CUDA or C++ extension, a library, a bad pointer), which "
             "writes no error file even under @record: " +
             where;
    case SIGABRT:
      return "abort(): a failed assertion, a C++ exception nothing caught, or the NCCL watchdog "
             "ending a rank after a timeout; its log's last lines say which";
    case SIGBUS:
      return "a bus error: most often shared memory (/dev/shm) too small for the data loader's "
             "workers or NCCL (a container needs --shm-size or --ipc=host); else " +
             where;
    case SIGFPE:
    case SIGILL:
      return "a crash in native code (an integer division by zero, or an instruction this CPU "
             "lacks: a binary built for another CPU), which writes no error file: " +
             where;
    case SIGUSR1:
    case SIGUSR2:
      return fmt::format(
          "the program has no handler for {0}, so its default action ended the rank: Slurm's "
          "warning before the time limit (sbatch --signal=B:{1}@<seconds>, which muster-sbatch "
          "writes from slurm.checkpoint_lead) or scancel -s {1}; install a {0} handler that saves "
          "a checkpoint and exits with {2} (muster-train does; Megatron's --exit-signal-handler "
          "saves on SIGTERM only), or set slurm.checkpoint_lead = 0 (drop --signal)",
          n == SIGUSR1 ? "SIGUSR1" : "SIGUSR2", n == SIGUSR1 ? "USR1" : "USR2", 128 + n);
    default:
      return "a signal ends a worker without an error file, even under @record: what sent it "
             "(the launcher's hang detection, a person, the kernel) is in the lines around it";
  }
}

void worker(finding& f, const explain_context& context) {
  if (!fact(f, "launcher").empty()) return launcher(f);
  // the run store's first failure of an attempt that launch.max_restarts restarted
  const auto ranks =
      ranks_of(f) + (fact(f, "restarted").empty() ? "" : ", before the run restarted,");
  if (f.category == "worker_killed_sigkill" && fact(f, "source") == "lost") {
    const auto why = fact(f, "lost_why");
    f.summary = fmt::format(
        "{} died with the run's launcher: the run store says running, but {}; a launcher "
        "killed with SIGKILL (with its job, or a node that went down) records nothing, and its "
        "ranks get SIGKILL when it dies",
        ranks, why.empty() ? "no process has the pid it recorded" : why);
    f.fixes = {
        "find what killed the launcher: dmesg -T | grep -i -E 'killed process|oom' (the OOM "
        "killer), journalctl, sacct -j <job>; stop a run with SIGTERM or SIGINT (Ctrl-C), which "
        "it records",
        "resume from the newest checkpoint it saved: a \"resume:\" line below names it where "
        "there is one (checkpoint.load=<it>); with none (checkpoint.interval = 0 saves only "
        "after the last step, or on a signal) the job starts over"};
    return;
  }
  if (f.category == "worker_killed_sigkill" && !fact(f, "srun_ended_step").empty()) {
    f.summary = fmt::format("{} was killed with SIGKILL (signal 9){}", ranks, kAfterSrunEndedStep);
    f.fixes = {kSrunEndedStepFix};
    return;
  }
  if (f.category == "worker_killed_sigkill") {
    f.summary = fmt::format("{} was killed with SIGKILL (signal 9){}; {}", ranks,
                            aside(fact(f, "pid").empty() ? "" : "pid " + fact(f, "pid")),
                            context.categories.contains("host_oom_kill")
                                ? "the kernel's OOM killer above is the likely sender"
                                : "these logs hold no evidence of an OOM kill");
    f.fixes = {
        "look for the kernel's OOM killer on that node: dmesg -T | grep -i -E "
        "'killed process|oom' and sacct -j <job> --format=JobID,State,MaxRSS; give "
        "that output with --log",
        "Slurm sends SIGKILL at the time limit and after scancel (sacct shows the "
        "state); a launcher sends it to workers still alive after its grace period "
        "(launch.kill_grace)"};
    return;
  }
  const auto error = fact(f, "error");
  const auto code = fact(f, "exit_code");
  const auto number = fact(f, "signal");  // the store's: the signal that ended it
  const auto signal = !fact(f, "signal_name").empty() ? fact(f, "signal_name")
                      : !number.empty()               ? signal_text(number)
                                                      : "";
  f.summary = fmt::format("{} failed{}{}", ranks,
                          !code.empty()     ? " with exit code " + code
                          : !signal.empty() ? ": " + signal
                                            : "",
                          error.empty() ? "" : ": " + error);
  const auto file = fact(f, "error_file");
  if (!number.empty() && error.empty()) {
    // a signal writes no error file, with @record or without
    f.fixes.push_back(crash_advice(number));
    return;
  }
  if (!fact(f, "traceback_file").empty())  // the exception that ended its Python traceback
    f.fixes.push_back(fmt::format(
        "the error above ends {} Python traceback; the whole traceback is in {}{}, from line {}",
        fact(f, "error_rank").empty() ? "its" : "rank " + fact(f, "error_rank") + "'s",
        fact(f, "traceback_own_log").empty() ? "" : "the rank's log ", fact(f, "traceback_file"),
        fact(f, "traceback_line")));
  else if (!error.empty() && fact(f, "error_kind") == "bad_input")
    // muster-train's word on its input (a job key it cannot run, a data path): no traceback
    f.fixes.push_back(fmt::format(
        "the error above names the input to change{}: change it and run again; the rank's log "
        "has the lines before it",
        file.empty() ? "" : " (error file " + file + ")"));
  else if (!error.empty())
    f.fixes.push_back(
        fmt::format("the error above is the worker's own{}; its traceback (or its last lines) is "
                    "in the rank's log",
                    file.empty() ? "" : " (error file " + file + ")"));
  else if (!file.empty() && !fact(f, "error_file_missing").empty())
    f.fixes.push_back(
        fmt::format("its error file {} is not on this host: run muster diagnose on "
                    "{} or copy the file here",
                    file, f.hosts.empty() ? "the rank's node" : *f.hosts.begin()));
  else if (context.torchelastic)  // torchrun's job: muster's launcher has no part in it
    f.fixes.push_back(
        "no error file: torchrun writes one only when the entry point is wrapped with "
        "@record (torch.distributed.elastic.multiprocessing.errors.record); read the rank's "
        "log for its last lines (muster's engine always writes one)");
  else if (!fact(f, "last_output").empty())
    f.fixes.push_back(fmt::format(
        "no error file and no Python traceback; its last output: {} (the rest in logs/rank-{}.log "
        "of its run directory)",
        fact(f, "last_output"), f.ranks.size() == 1 ? std::to_string(*f.ranks.begin()) : "N"));
  else
    f.fixes.push_back(fmt::format(
        "no error file and no Python traceback: read the rank's log for its last lines (a run "
        "of muster keeps them in logs/rank-{}.log of its run directory)",
        f.ranks.size() == 1 ? std::to_string(*f.ranks.begin()) : "N"));
  if (!fact(f, "traceback").empty() && error.empty())
    f.fixes.push_back(fmt::format("torchelastic's traceback line: {}", fact(f, "traceback")));
}

// muster's launchers that did not meet within launch.timeout_rendezvous (log_signal.cpp): node
// 0's view names the nodes that did not arrive; another node's, the store it did not find.
void launchers_rendezvous(finding& f) {
  const auto node0 = fact(f, "node0").empty() ? "node 0" : fact(f, "node0");
  const auto timeout = fact(f, "timeout_s").empty() ? "" : " (" + fact(f, "timeout_s") + " s now)";
  const std::string late =
      "a node that starts late (container pull, slow file system): raise "
      "launch.timeout_rendezvous" +
      timeout;
  if (!fact(f, "missing").empty()) {
    f.summary = fmt::format(
        "muster's launchers did not meet: {} nodes reached the rendezvous within {} s; missing: {}",
        fact(f, "reached"), fact(f, "timeout_s"), fact(f, "missing"));
    f.fixes = {
        "check that srun started `muster launch` on every node of the step (srun "
        "--ntasks-per-node=1), and read the missing nodes' launcher lines in the job's "
        "output (their slurmd log when there are none)",
        fmt::format("the missing nodes must resolve and reach {} (node 0): else set "
                    "launch.master_addr to an address of node 0 they can reach",
                    node0),
        late};
    return;
  }
  f.summary =
      fmt::format("muster's launcher on {} found no rendezvous store of node 0 ({}) within {} s",
                  fact(f, "from"), node0, fact(f, "timeout_s"));
  f.fixes = {fmt::format("check that node 0's launcher ({}) started and runs: its lines in the "
                         "job's output",
                         node0),
             fmt::format("{} must resolve and be reachable from {}: else set launch.master_addr "
                         "to an address of node 0 it can reach",
                         fact(f, "address").empty() ? node0 : fact(f, "address"), fact(f, "from")),
             late};
}

void setup(finding& f, const explain_context& context) {
  const auto ranks = ranks_of(f);
  if (f.category == "env_misconfig") {
    if (fact(f, "variable") == "CUDA_DEVICE_MAX_CONNECTIONS") {
      f.summary = fmt::format(
          "CUDA_DEVICE_MAX_CONNECTIONS must be {} for this layout (Megatron "
          "asserts it under tensor, context or sequence parallelism) on {}",
          fact(f, "wanted").empty() ? "1" : fact(f, "wanted"), ranks);
      f.fixes = {
          "let musterd set it: it sets CUDA_DEVICE_MAX_CONNECTIONS by parallel mode "
          "for every step on its node (muster node env shows the decision)",
          "by hand: export CUDA_DEVICE_MAX_CONNECTIONS=1 in the batch script before "
          "srun/torchrun"};
    } else {
      f.summary = fmt::format(
          "NCCL user buffers with expandable segments on {}: registered "
          "buffers must not be remapped",
          ranks);
      f.fixes = {
          "remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF, or set "
          "comm.nccl_ub = false (Megatron: drop --use-nccl-ub)",
          "PyTorch 2.11 and later support both together"};
    }
  } else if (f.category == "checkpoint_mismatch" && !fact(f, "layout").empty()) {
    f.summary = fmt::format(
        "the checkpoint's optimizer state is sharded for another layout on {}: it was saved with "
        "{}",
        ranks, fact(f, "layout"));
    f.fixes = {
        "resume under the layout it was saved with (the same ranks, parallel.sharding "
        "and parallel.expert)",
        "or set checkpoint.load_optim = false: its weights and step, with a fresh optimizer "
        "state (Megatron's --no-load-optim)"};
  } else if (f.category == "checkpoint_mismatch") {
    std::string what;
    if (!fact(f, "tensor").empty())
      what = fmt::format(": {} is {} in the checkpoint, {} in the model", fact(f, "tensor"),
                         fact(f, "checkpoint_shape"), fact(f, "model_shape"));
    else if (!fact(f, "problem").empty())
      what = ": " + fact(f, "problem");
    f.summary = fmt::format("the checkpoint does not fit the model on {}{}", ranks, what);
    f.fixes = {
        "compare the checkpoint's config.json with the job's [model] section "
        "(hidden_size, num_experts, moe_ffn_hidden_size, vocab_size, num_layers)",
        "checkpoint.load (Megatron --load) points at another model's directory? muster "
        "resumes from the newest step-N under checkpoint.dir",
        "a checkpoint saved under another TP/PP/EP layout must be converted (Megatron "
        "dist-ckpt, or an HF export); muster's weights are layout-free, its optimizer state is "
        "not (checkpoint.load_optim = false leaves it out)"};
  } else if (f.category == "rendezvous_timeout" && fact(f, "source") == "muster") {
    launchers_rendezvous(f);
  } else if (f.category == "rendezvous_timeout" && !fact(f, "unresolved").empty()) {
    f.summary = fmt::format(
        "the ranks cannot resolve the rendezvous host {}{}, so they never "
        "meet: they retry until launch.timeout_rendezvous",
        fact(f, "unresolved"), aside(fact(f, "resolver")));
    f.fixes = {
        "set launch.master_addr to an address every node resolves and reaches (an IP; "
        "muster takes the first host of the Slurm step, torchrun --master-addr / "
        "MASTER_ADDR)",
        "or make that name resolve on every node (DNS, /etc/hosts; containers with "
        "--network host do not add the host's name)"};
  } else if (f.category == "rendezvous_timeout") {
    // the ranks of the world that said no timeout: the ones the others waited for
    std::vector<int> silent;
    if (context.world_size > 0 && !f.ranks.empty())
      for (int r = 0; r < context.world_size; ++r)
        if (!f.ranks.contains(r)) silent.push_back(r);
    f.summary = fmt::format(
        "the ranks did not meet at the rendezvous{}{}{}{}", aside(fact(f, "address")),
        fact(f, "joined").empty() ? "" : ": " + fact(f, "joined") + " joined",
        f.ranks.empty() ? "" : "; said by " + ranks,
        silent.empty() ? ""
                       : fmt::format("; rank {} said no timeout: the one{} never arrived?",
                                     rank_ranges(silent), silent.size() > 1 ? "s that" : " that"));
    f.fixes.clear();
    if (!silent.empty())
      f.fixes.push_back(fmt::format(
          "look at where rank {} stood (its log, or py-spy dump while it runs): still starting "
          "(an import, data or a checkpoint loading), or stuck before it joined",
          rank_ranges(silent)));
    if (context.num_nodes != 1)  // on one node, the ranks meet on its own loopback
      f.fixes.push_back(
          "check every node reaches MASTER_ADDR:MASTER_PORT (muster takes the first host "
          "of the Slurm step, or launch.master_addr; a firewall or a node-local address "
          "breaks it), and that no rank sets its own: muster gives every rank the same "
          "MASTER_ADDR and MASTER_PORT (the rank's log shows the address it tried)");
    f.fixes.push_back(
        "a rank or node that starts late (container pull, slow file system): raise the "
        "program's store timeout (torch init_process_group(timeout=...), torchrun --rdzv-conf "
        "join_timeout=..., Megatron --distributed-timeout-minutes); launch.timeout_rendezvous "
        "is the launchers' own meeting under muster launch");
  } else if (f.category == "rendezvous_port_in_use") {
    f.summary = fmt::format("the rendezvous port {}is already in use",
                            fact(f, "port").empty() ? "" : fact(f, "port") + " ");
    f.fixes = {
        "leave launch.master_port = 0 (muster picks a free port), or torchrun "
        "--master-port / MASTER_PORT another port; two jobs on one node must not share it"};
  } else if (f.category == "ray_channel_timeout") {
    f.summary = fmt::format("a Ray compiled-graph channel timed out{} on {}",
                            fact(f, "timeout_s").empty()
                                ? ""
                                : " (RAY_CGRAPH_get_timeout = " + fact(f, "timeout_s") + " s)",
                            ranks);
    f.fixes = {
        "with tensor parallel size > 1, set enforce_eager=True for the rollout engine "
        "(vLLM): capturing CUDA graphs on TP ranks stalls the channel "
        "(Pai-Megatron-Patch FAQ)",
        "or raise RAY_CGRAPH_get_timeout (seconds, default 10) when a step is "
        "legitimately that long"};
  }
}

void node(finding& f, const explain_context& context) {
  const auto ranks = ranks_of(f);
  if (f.category == "slurm_time_limit") {
    f.summary =
        fmt::format("Slurm cancelled {} at its time limit ({})",
                    fact(f, "job").empty() ? "step " + fact(f, "step") : "job " + fact(f, "job"),
                    fact(f, "at"));
    // a lead the limit allows: under it (muster-sbatch refuses one that is not)
    const auto lead = context.time_limit_s > 0 ? suggested_checkpoint_lead(context.time_limit_s)
                                               : std::int64_t{300};
    f.fixes =
        context.muster_sbatch
            ? std::vector<
                  std::string>{"ask for more time (slurm.time)",
                               context.checkpoint_lead_s > 0
                                   ? fmt::format(
                                         "its checkpoint_lead's USR1, {} s before the limit, "
                                         "left too little time to save and stop: raise "
                                         "slurm.checkpoint_lead (below slurm.time), or make the "
                                         "program stop on USR1",
                                         context.checkpoint_lead_s)
                                   : fmt::format(
                                         "checkpoint before the limit: slurm.checkpoint_lead "
                                         "= {} (seconds), and slurm.requeue = true to come "
                                         "back where it stopped",
                                         lead)}
            : std::vector<std::string>{
                  "ask for more time (sbatch --time)",
                  fmt::format("checkpoint before the limit: sbatch --signal=B:USR1@{} and "
                              "launch.requeue_on_signal = true to come back where it stopped",
                              lead)};
  } else if (f.category == "node_failure") {
    const auto nodes =
        f.hosts.empty() ? std::string("a node") : fmt::format("{}", fmt::join(f.hosts, ", "));
    const bool slurm = fact(f, "slurm") == "yes";
    f.summary = slurm ? fmt::format(
                            "Slurm says {} failed{}: the ranks there ended with it, and the "
                            "others' collectives failed for want of them",
                            nodes, fact(f, "job").empty() ? "" : " (job " + fact(f, "job") + ")")
                      : fmt::format(
                            "the launcher on {} vanished with its ranks (killed, or the node went "
                            "down): the others' collectives failed for want of them",
                            nodes);
    f.fixes = {
        fmt::format("ask why: sinfo -R, scontrol show node {} (its Reason), and dmesg or "
                    "journalctl on it; drain it if it is faulty",
                    f.hosts.empty() ? "<node>" : *f.hosts.begin()),
        fmt::format("run again without it (sbatch --exclude={}), from the newest "
                    "checkpoint; {} lets Slurm requeue a job whose node failed, and it goes on "
                    "from there",
                    f.hosts.empty() ? "<node>" : fmt::format("{}", fmt::join(f.hosts, ",")),
                    context.muster_sbatch ? "slurm.requeue = true" : "sbatch --requeue")};
  } else if (f.category == "host_oom_kill") {
    f.summary = fmt::format("the kernel's OOM killer ended {} (host memory, not GPU memory)",
                            f.ranks.empty() ? "a task" : ranks);
    f.fixes = {"ask Slurm for more host memory (sbatch --mem or --mem-per-gpu)",
               "fewer data loader workers and smaller prefetch; pinned-memory buffers count too"};
  } else if (f.category == "host_memory_error") {
    auto tried = fact(f, "tried_to_allocate");  // bytes, or numpy's "7.45 GiB"
    if (!tried.empty() && tried.size() < 19 &&
        tried.find_first_not_of("0123456789") == std::string::npos)
      tried = format_bytes(std::stoll(tried));
    f.summary = fmt::format("{} could not allocate host memory, not GPU memory{}", ranks,
                            aside(tried.empty() ? "" : "tried " + tried));
    f.fixes = {
        "ask Slurm for more host memory (sbatch --mem or --mem-per-gpu); a ulimit -v or the "
        "job's cgroup caps it too (ulimit -a; sacct -j <job> --format=JobID,ReqMem,MaxRSS)",
        "load less at once: fewer data loader workers and smaller prefetch, pinned-memory "
        "buffers, a checkpoint or dataset read whole into CPU memory"};
  } else if (f.category == "gpu_hardware_fault") {
    f.summary = fmt::format("a GPU fault in the kernel log{}{}",
                            fact(f, "xid").empty() ? "" : ": Xid " + fact(f, "xid"),
                            fact(f, "pci").empty() ? "" : " on PCI " + fact(f, "pci"));
    f.fixes = {
        "drain the node (scontrol update nodename=<node> state=drain reason=xid) and "
        "resubmit without it (sbatch --exclude=<node>)",
        "muster node preflight on the node shows what the driver reports now"};
  } else if (f.category == "nccl_system_error" && fact(f, "backend") == "gloo") {
    f.summary = fmt::format("Gloo: a peer closed its connection to {}", ranks);
    f.fixes = {
        "a peer's end went away: find the rank that died first (muster status RUN names the "
        "first failure; its log, dmesg -T for the OOM killer)",
        "with no rank dead, the network between the ranks: GLOO_SOCKET_IFNAME naming an "
        "interface every node has"};
  } else if (f.category == "nccl_system_error") {
    const auto cause = fact(f, "sub_cause");
    f.summary = fmt::format("NCCL unhandled system error on {}{}", ranks, aside(cause));
    f.fixes = cause == "shared memory"
                  ? std::vector<std::string>{"make /dev/shm larger: a container needs "
                                             "--shm-size or --ipc=host"}
                  : std::vector<std::string>{
                        "run with NCCL_DEBUG=INFO for the sub-cause; check NCCL_SOCKET_IFNAME "
                        "names an interface every node has (muster node env)"};
  }
}

// f.summary and f.fixes by the category's family.
void explain_category(finding& f, const explain_context& context) {
  const auto& c = f.category;
  if (c == "cuda_oom" || c == "nccl_oom")
    memory(f);
  else if (c == "nccl_timeout" || c == "nccl_timeout_cascade" || c == "hang_watchdog_stuck")
    collective(f, context);
  else if (c == "worker_killed_sigkill" || c == "worker_failed_see_error_file")
    worker(f, context);
  else if (c == "slurm_time_limit" || c == "host_oom_kill" || c == "host_memory_error" ||
           c == "gpu_hardware_fault" || c == "nccl_system_error" || c == "node_failure")
    node(f, context);
  else
    setup(f, context);
}

}  // namespace

void explain(finding& f, const explain_context& context) {
  explain_category(f, context);
  // the fixes' `sacct -j <job>`, with the run's job where it is known
  constexpr std::string_view kAnyJob = "sacct -j <job>";
  if (context.slurm_job.empty()) return;
  for (auto& fix : f.fixes)
    for (auto at = fix.find(kAnyJob); at != std::string::npos; at = fix.find(kAnyJob, at))
      fix.replace(at, kAnyJob.size(), "sacct -j " + context.slurm_job);
}

}  // namespace muster::launcher::diagnose
