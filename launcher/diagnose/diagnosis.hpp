// From signals to a diagnosis: the findings of `muster diagnose`, each a category, whether it
// is the root cause or a knock-on effect, the ranks involved, evidence lines (file:line), what
// the lines say, and the fixes in the order to try them, naming the setting to change (muster's
// config key and the Megatron / torchrun / Slurm flag).
//
// Lines with a timestamp (line_time.hpp) are ordered by it across files; lines without one
// keep the order they were read in.
//
// Root and knock-on: a failure that names its cause (an OOM, a GPU fault, a bad environment, a
// checkpoint that does not fit, a time limit, ...) comes before one that only says a worker died
// (killed, failed, hung as muster saw it), which comes before a collective timeout, which comes
// before a stuck watchdog; among equals the earliest (by time where both lines give one, else
// the first read). Each distinct collective that timed out (op and sequence number) is its own
// timeout; the earliest may be the root, and every later one, like every timeout beside another
// root, is the cascade (nccl_timeout_cascade, one finding): the ranks that waited on the failed
// one time out in turn, and their lines may come first. A timeout that is the root names the
// ranks that reported no timeout at all: the usual culprits. With nothing found, `unknown` carries
// the most suspicious lines.
//
// A failed rank whose last Python traceback was read (its own log, else any other) quotes the
// exception line that ended it ("RuntimeError: boom") in its summary and evidence, and its fix
// says where the whole traceback is.
//
// Stopped as asked: Slurm's "*** JOB 9 ON n1 CANCELLED AT <time> ***" (scancel) and "... DUE TO
// JOB REQUEUE ***" (not its time limit, a node failure or a preemption), and muster's launcher's
// "stopped by SIGTERM" or "passed on to them, as asked". Where one is read, the workers that
// exited on a stop's signal (exit codes 128 + SIGINT, SIGUSR1, SIGUSR2 or SIGTERM, or those
// signals; after Slurm's stops SIGKILL too, which srun makes of the cancel's SIGTERM) are no
// failure, and with nothing found the stop's own lines and those ends are no suspicious lines. A
// step's cancel after srun's "Terminating StepId=9.0" is no stop asked: srun ended the step itself
// after a task's bad end (--kill-on-bad-exit), and the tasks it killed then are knock-on effects of
// the one that ended first, never merged with it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "launcher/diagnose/elastic_failures.hpp"
#include "launcher/diagnose/log_signal.hpp"

namespace muster::launcher::diagnose {

struct evidence_line {
  std::string file;
  std::int64_t line = 0;
  std::string text;
  std::optional<double> time_s;  // when the line says it was written (line_time.hpp)
};

struct finding {
  std::string category;
  bool root = false;
  std::set<int> ranks;
  // ranks hung with these that waited in their collectives (their stacks said so): the same
  // hang detection stopped them, so their ends are explained by this finding
  std::set<int> waited_ranks;
  std::set<std::string> hosts;
  std::vector<evidence_line> evidence;       // the first kMaxEvidence lines
  std::int64_t count = 0;                    // lines that said it
  std::map<std::string, std::string> facts;  // from the earliest line that said it (by the
                                             // lines' times, else the first read)
  std::optional<double> first_time_s;        // the earliest time of its lines that give one
  std::int64_t first_read = 0;               // the place of its first signal in the reading:
                                             // "the first read" among equals
  std::string summary;                       // one line for people
  std::vector<std::string> fixes;            // in the order to try them
};

inline constexpr std::size_t kMaxEvidence = 5;

struct diagnosis {
  std::vector<finding> findings;          // the root first, then the knock-on effects in order
  // The line that says the job was stopped as asked (scancel, a requeue, a signal the launcher
  // passed on): the workers that ended on that stop's signal are no finding.
  std::optional<evidence_line> stopped_as_asked;
  std::vector<evidence_line> suspicious;  // with no finding: lines with error words, the last ones
  std::int64_t lines_read = 0;
  bool failed() const { return !findings.empty(); }
};

// Collects the lines of one or more logs, in order, in bounded memory.
class diagnoser {
 public:
  // `world_size` (0: unknown) lets a timeout name the ranks that did not report.
  explicit diagnoser(int world_size = 0) : world_size_(world_size) {}
  // One line of `file`; `file_rank` is the rank whose log the file is (its lines' rank when
  // they carry no prefix).
  void add_line(const std::string& file, std::int64_t number, std::string_view line,
                std::optional<int> file_rank = std::nullopt);
  // A signal from elsewhere than a log line (the run store, an error file), with its evidence.
  void add_signal(log_signal signal, evidence_line evidence);
  // The host each rank ran on (from the run store), so findings name their hosts.
  void set_rank_hosts(std::map<int, std::string> hosts) { rank_hosts_ = std::move(hosts); }
  // What srun's "task N" lines count: ranks (srun starts the workers, one task per rank) or
  // muster's launchers (`srun --ntasks-per-node=1 muster launch`, as muster-sbatch's script
  // runs it: task N is node N's launcher, which ends when its ranks do). Unset (logs alone), a
  // file's tasks are launchers from a launcher's first line on (launcher_lines.hpp), else ranks.
  enum class srun_tasks { ranks, launchers };
  void set_srun_tasks(srun_tasks tasks) { srun_tasks_ = tasks; }
  // The planner's per-GPU estimate for the job (0: none), quoted beside an OOM.
  void set_planned_memory(std::int64_t bytes) { planned_bytes_ = bytes; }
  // What the run's job already does for memory, where its program read the job file
  // (muster-train): "parallel.sharding", "train.recompute", "train.micro_batch_size",
  // "train.max_tokens_per_pack" and their values. An OOM's fixes leave out what is done.
  void set_memory_settings(std::map<std::string, std::string> settings) {
    memory_settings_ = std::move(settings);
  }
  // The rank the launcher saw fail first (the run store's first_failure): where a root that
  // names no cause of its own (a peer's closed connection, a timeout, a death) is sought first.
  void set_first_failed_rank(int rank) { first_failed_ = rank; }
  // The run's Slurm job (its fixes' sacct names it), and whether muster-sbatch submitted it
  // (its fixes name the [slurm] keys, not sbatch's options).
  void set_slurm_job(std::string job, bool muster_sbatch) {
    slurm_job_ = std::move(job);
    muster_sbatch_ = muster_sbatch;
  }
  // The job's time limit in seconds (0: unknown or none) and slurm.checkpoint_lead: a time
  // limit's fixes propose a lead the limit allows.
  void set_time_limit(std::int64_t limit_s, int checkpoint_lead_s) {
    time_limit_s_ = limit_s;
    checkpoint_lead_s_ = checkpoint_lead_s;
  }
  // The nodes the run had (0: unknown): on one node a rendezvous that timed out is no network's.
  void set_num_nodes(int num_nodes) { num_nodes_ = num_nodes; }
  // Lines read in all (a reader that skips lines without keywords() still counts them).
  void add_lines_read(std::int64_t lines) { lines_ += lines; }
  diagnosis finish() const;

  // The words of the lines add_line needs to see: the signals' and the error-looking ones that
  // `unknown` quotes. Every other line may be skipped.
  static std::span<const std::string_view> keywords();

 private:
  void add_elastic_failure(const std::string& file, const elastic_failure& failure);
  // A line of a rank's Python traceback: its start, or the exception line that ends it.
  void add_traceback_line(const std::string& file, std::int64_t number, std::string_view line,
                          bool launchers, std::optional<int> file_rank);
  // A failed rank's finding quotes the exception that ended its last traceback (diagnosis.hpp).
  void quote_exception(finding& f) const;
  // A line of a faulthandler stack ("Current thread 0x... (most recent call first):", then
  // its frames, the innermost first).
  void add_stack_line(const std::string& file, std::int64_t number, std::string_view line,
                      bool launchers, std::optional<int> file_rank);
  // A hung rank's finding quotes where its stack stood (stood_at_).
  void quote_stack(finding& f) const;
  // `signal` into its finding (add_signal holds back a worker's end on a stop's signal, which
  // finish() adds only where no stop was asked: diagnosis::stopped_as_asked).
  void add_now(log_signal signal, evidence_line evidence, std::int64_t read);

  int world_size_;
  std::int64_t planned_bytes_ = 0;
  std::map<std::string, std::string> memory_settings_;
  std::string slurm_job_;
  bool muster_sbatch_ = false;
  std::int64_t time_limit_s_ = 0;
  int checkpoint_lead_s_ = -1;  // -1: unknown
  std::optional<int> first_failed_;
  std::map<int, std::string> rank_hosts_;
  std::optional<srun_tasks> srun_tasks_;
  std::set<std::string> launcher_files_;  // files with a node launcher's first line
  // the last "muster: " line by file and srun -l label ("" without one), unless it was a finding
  std::map<std::pair<std::string, std::string>, evidence_line> launcher_said_;
  std::map<std::string, elastic_failure_reader> elastic_;  // by file
  std::vector<finding> findings_;                          // in the order first seen
  std::vector<evidence_line> suspicious_;
  std::vector<evidence_line> suspicious_unstopped_;  // those that are no part of a stop
  std::int64_t lines_ = 0;
  std::optional<evidence_line> stopped_as_asked_;
  bool stopped_by_slurm_ = false;  // scancel or a requeue, not the launcher
  std::set<std::string> srun_ended_step_;  // files where srun said it ends the step itself
  struct held_end {
    log_signal signal;
    evidence_line evidence;
    std::int64_t read = 0;  // its place in the reading (finding::first_read)
  };
  std::vector<held_end> stop_ends_;  // held by add_signal
  std::int64_t signals_read_ = 0;    // by add_signal, the held ones too
  // Python's tracebacks: the start of each rank's open one by file and rank, and by rank the
  // exception line that ended its last (one in the rank's own log before any other file's)
  struct raised {
    evidence_line exception;
    std::string text;     // the exception line without the rank's prefix
    evidence_line start;  // "Traceback (most recent call last):"
    bool own_log = false;
  };
  std::map<std::pair<std::string, int>, evidence_line> traceback_open_;
  std::map<int, raised> raised_;
  // Python's faulthandler stacks (a hung rank's, dumped on the hang's SIGABRT): the stacks open
  // by file and rank (true: the current thread's, the one that hung), and by rank the innermost
  // frame of the last (the current thread's over another's)
  std::map<std::pair<std::string, int>, bool> stack_open_;
  std::map<int, std::pair<evidence_line, bool>> stood_at_;
  int num_nodes_ = 0;
  bool torchelastic_ = false;  // torchrun's agent's lines were read
};

}  // namespace muster::launcher::diagnose
