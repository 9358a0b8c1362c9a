// node_writer: see run_store.hpp. Opening sets the connection up (WAL, synchronous, foreign
// keys, busy timeout), migrates, and prepares every statement once; each method binds a
// cached statement and runs it.
#include "common/run_store.hpp"

#include <chrono>
#include <string_view>
#include <thread>

#include <algorithm>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "common/run_store_schema.hpp"
#include "common/sqlite_db.hpp"

namespace muster::store {
namespace {

constexpr std::string_view kOtherRunSql = "SELECT run_id FROM runs WHERE run_id <> ?1 LIMIT 1";

constexpr std::string_view kPutRunSql = R"sql(
INSERT INTO runs (run_id, name, state, created_ms, updated_ms, world_size, num_nodes,
                  slurm_job_id, config_path, config_text, slurm_cluster, slurm_task_job_id)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT (run_id) DO UPDATE SET
  name = excluded.name, state = excluded.state,
  created_ms = MIN(runs.created_ms, excluded.created_ms),
  updated_ms = excluded.updated_ms, world_size = excluded.world_size,
  num_nodes = excluded.num_nodes, slurm_job_id = excluded.slurm_job_id,
  config_path = excluded.config_path, config_text = excluded.config_text,
  slurm_cluster = excluded.slurm_cluster, slurm_task_job_id = excluded.slurm_task_job_id)sql";

constexpr std::string_view kSetRunStateSql =
    "UPDATE runs SET state = ?2, updated_ms = ?3 WHERE run_id = ?1 RETURNING run_id";

constexpr std::string_view kPutRankSql = R"sql(
INSERT INTO ranks (rank, host, local_rank, pid, state, exit_code, signal, updated_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (rank) DO UPDATE SET
  host = excluded.host, local_rank = excluded.local_rank, pid = excluded.pid,
  state = excluded.state, exit_code = excluded.exit_code, signal = excluded.signal,
  updated_ms = excluded.updated_ms)sql";

constexpr std::string_view kAddStepSql = R"sql(
INSERT INTO steps (rank, step, loss, tokens, step_time_s, mem_bytes, time_ms, aux_loss, z_loss,
                   grad_norm, lr, tokens_per_s, mfu, peak_mem_bytes, comm_wait_s, mem_device)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
ON CONFLICT (rank, step) DO UPDATE SET
  loss = excluded.loss, tokens = excluded.tokens, step_time_s = excluded.step_time_s,
  mem_bytes = excluded.mem_bytes, time_ms = excluded.time_ms, aux_loss = excluded.aux_loss,
  z_loss = excluded.z_loss, grad_norm = excluded.grad_norm, lr = excluded.lr,
  tokens_per_s = excluded.tokens_per_s, mfu = excluded.mfu,
  peak_mem_bytes = excluded.peak_mem_bytes, comm_wait_s = excluded.comm_wait_s,
  mem_device = excluded.mem_device)sql";

constexpr std::string_view kAddErrorSql =
    "INSERT INTO errors (time_ms, rank, step, phase, kind, message) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

constexpr std::string_view kAddEventSql =
    "INSERT INTO events (time_ms, rank, severity, kind, message) VALUES (?1, ?2, ?3, ?4, ?5)";

// Sets up a fresh connection for writing. The version check comes first: it is the first
// statement that reads the file (a file that is not SQLite fails there with SQLITE_NOTADB), and
// a file this muster must refuse is refused before journal_mode = WAL rewrites its header.
void configure(sqlite_db& db, const writer_options& options) {
  db.set_busy_timeout(options.busy_timeout_ms);
  schema::check_writable(db);
  // Switching to WAL takes an exclusive lock without waiting on the busy handler, so several
  // processes opening a new node file at once (one srun task per rank) can see SQLITE_BUSY
  // here: the switch is retried until the busy timeout, and once the file is in WAL mode it
  // needs no switch at all.
  std::optional<std::string> mode;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  for (;;) {
    try {
      mode = db.query_text("PRAGMA journal_mode = WAL", "switch to WAL mode");
      break;
    } catch (const store_error& e) {
      if (!e.busy() || std::chrono::steady_clock::now() >= give_up) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  MUSTER_CHECK(mode == "wal", errc::store,
               "run store {}: the filesystem refused WAL mode (journal_mode is '{}'); put "
               "launch.runs_dir on a local or shared filesystem with POSIX locks and mmap",
               db.file().string(), mode.value_or("?"));
  db.exec("PRAGMA synchronous = NORMAL", "set synchronous");
  db.exec("PRAGMA foreign_keys = ON", "enable foreign keys");
  if (options.max_bytes > 0) {
    auto page_size = db.query_int64("PRAGMA page_size", "read page size");
    auto pages = std::max<std::int64_t>(1, options.max_bytes / page_size);
    db.exec(fmt::format("PRAGMA max_page_count = {}", pages), "limit file size");
  }
}

}  // namespace

struct node_writer::impl {
  sqlite_db db;  // declared first: destroyed after the statements below
  sqlite_stmt other_run;
  sqlite_stmt put_run;
  sqlite_stmt set_run_state;
  sqlite_stmt put_rank;
  sqlite_stmt add_step;
  sqlite_stmt add_event;
  sqlite_stmt add_error;

  impl(const std::filesystem::path& file, const writer_options& options)
      : db(file, open_mode::read_write) {
    configure(db, options);
    schema::migrate(db);
    other_run = db.prepare(kOtherRunSql);
    put_run = db.prepare(kPutRunSql);
    set_run_state = db.prepare(kSetRunStateSql);
    put_rank = db.prepare(kPutRankSql);
    add_step = db.prepare(kAddStepSql);
    add_event = db.prepare(kAddEventSql);
    add_error = db.prepare(kAddErrorSql);
  }

  void insert_step(const step_record& s) {
    add_step.bind(1, s.rank);
    add_step.bind(2, s.step);
    add_step.bind(3, s.loss);
    add_step.bind(4, s.tokens);
    add_step.bind(5, s.step_time_s);
    add_step.bind(6, s.mem_bytes);
    add_step.bind(7, s.time_ms);
    add_step.bind(8, s.aux_loss);
    add_step.bind(9, s.z_loss);
    add_step.bind(10, s.grad_norm);
    add_step.bind(11, s.lr);
    add_step.bind(12, s.tokens_per_s);
    add_step.bind(13, s.mfu);
    add_step.bind(14, s.peak_mem_bytes);
    add_step.bind(15, s.comm_wait_s);
    if (s.mem_device.empty())
      add_step.bind_null(16);
    else
      add_step.bind(16, s.mem_device);
    // The only constraint a typed step can fail is the foreign key to its rank.
    add_step.execute(fmt::format("add step {} of rank {}", s.step, s.rank),
                     fmt::format("rank {} is not in this file: put the rank (put_rank) before "
                                 "its steps",
                                 s.rank));
  }
};

node_writer::node_writer(const std::filesystem::path& file, const writer_options& options)
    : impl_(std::make_unique<impl>(file, options)) {}

node_writer::~node_writer() = default;
node_writer::node_writer(node_writer&&) noexcept = default;
node_writer& node_writer::operator=(node_writer&&) noexcept = default;

void node_writer::put_run(const run_record& run) {
  sqlite_transaction transaction(impl_->db);
  std::optional<std::string> other;
  impl_->other_run.bind(1, run.run_id);
  impl_->other_run.for_each_row("look for another run",
                                [&] { other = impl_->other_run.column_text(0); });
  MUSTER_CHECK(!other, errc::store,
               "run store {}: this node file belongs to run '{}', not '{}'; each run needs its "
               "own run directory",
               file().string(), *other, run.run_id);
  sqlite_stmt& s = impl_->put_run;
  s.bind(1, run.run_id);
  s.bind(2, run.name);
  s.bind(3, to_string(run.state));
  s.bind(4, run.created_ms);
  s.bind(5, run.updated_ms);
  s.bind(6, run.world_size);
  s.bind(7, run.num_nodes);
  s.bind(8, run.slurm_job_id);
  s.bind(9, run.config_path);
  s.bind(10, run.config_text);
  s.bind(11, run.slurm_cluster);
  s.bind(12, run.slurm_task_job_id);
  s.execute(fmt::format("put run {}", run.run_id));
  transaction.commit();
}

void node_writer::set_run_state(std::string_view run_id, run_state state, epoch_ms updated_ms) {
  sqlite_stmt& s = impl_->set_run_state;
  s.bind(1, run_id);
  s.bind(2, to_string(state));
  s.bind(3, updated_ms);
  bool found = false;
  s.for_each_row(fmt::format("set state of run {}", run_id), [&] { found = true; });
  MUSTER_CHECK(found, errc::store,
               "run store {}: set state of run '{}': no such run in this file; put_run first",
               file().string(), run_id);
}

void node_writer::put_rank(const rank_record& rank) {
  sqlite_stmt& s = impl_->put_rank;
  s.bind(1, rank.rank);
  s.bind(2, rank.host);
  s.bind(3, rank.local_rank);
  s.bind(4, rank.pid);
  s.bind(5, to_string(rank.state));
  s.bind(6, rank.exit_code);
  s.bind(7, rank.signal);
  s.bind(8, rank.updated_ms);
  s.execute(fmt::format("put rank {}", rank.rank));
}

void node_writer::add_step(const step_record& step) {
  impl_->insert_step(step);
}

void node_writer::add_steps(std::span<const step_record> steps) {
  sqlite_transaction transaction(impl_->db);
  for (const step_record& step : steps) impl_->insert_step(step);
  transaction.commit();
}

void node_writer::add_event(const event_record& event) {
  sqlite_stmt& s = impl_->add_event;
  s.bind(1, event.time_ms);
  s.bind(2, event.rank);
  s.bind(3, to_string(event.level));
  s.bind(4, event.kind);
  s.bind(5, event.message);
  s.execute(fmt::format("add event {}", event.kind));
}

void node_writer::add_error(const error_record& error) {
  sqlite_stmt& s = impl_->add_error;
  s.bind(1, error.time_ms);
  s.bind(2, error.rank);
  s.bind(3, error.step);
  s.bind(4, error.phase);
  s.bind(5, error.kind);
  s.bind(6, error.message);
  s.execute(fmt::format("add error of rank {}", error.rank));
}

int node_writer::schema_version() const {
  return schema::user_version(impl_->db);
}

const std::filesystem::path& node_writer::file() const {
  return impl_->db.file();
}

}  // namespace muster::store
