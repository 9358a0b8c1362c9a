// Whether a node's launcher of a run is alive, from any process of the host, at once: each
// launcher holds a shared flock on <run_dir>/logs/launcher-<host>.lock while it runs, which the
// kernel drops when it dies, SIGKILL included. A pid says less: in another PID namespace of the
// same host name it is not there while the launcher runs, and a rank's pid is gone a moment
// before its launcher records its end. `muster status` reads it to call a run lost at once
// rather than after its heartbeats go stale.
#pragma once

#include <filesystem>
#include <optional>

namespace muster::store {

// The lock of one launcher, held from construction to destruction (shared: launchers of one
// run on one host do not exclude each other). Where it cannot be taken (a file system without
// flock, a run directory that is not writable), holds nothing and leaves no file: the run goes
// on, and status falls back to the heartbeats.
class launcher_lock {
 public:
  explicit launcher_lock(const std::filesystem::path& file);
  ~launcher_lock();
  launcher_lock(const launcher_lock&) = delete;
  launcher_lock& operator=(const launcher_lock&) = delete;

  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// true: a launcher holds `file`'s lock; false: the file is there and nobody holds it (its
// launchers have ended); none: no such file (a run from before the lock, or a rank that is its
// own task under Slurm), or the lock cannot be asked.
std::optional<bool> launcher_alive(const std::filesystem::path& file);

}  // namespace muster::store
