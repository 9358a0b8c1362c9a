// This task's link to the PMIx server of its Slurm step, when srun started it with --mpi=pmix.
//
// The launchers use it for one thing: node 0 publishes where its rendezvous store is, and the
// others read it from there before they try the address file or the derived ports
// (store_address.hpp). PMIx's own headers stay in the .cpp.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace muster::launcher::rendezvous {

class pmix_session {
 public:
  // Connects when this process is a task of a PMIx step (PMIX_NAMESPACE is set). Returns
  // nullptr when it is not, or when the step's PMIx server does not answer; then `why` says
  // which, for the log.
  static std::unique_ptr<pmix_session> join_step(std::string& why);
  ~pmix_session();  // PMIx_Finalize
  pmix_session(const pmix_session&) = delete;
  pmix_session& operator=(const pmix_session&) = delete;

  int rank() const { return rank_; }               // the task's PMIx rank (SLURM_PROCID)
  const std::string& nspace() const { return nspace_; }

  // Puts key = value for every task of the step and commits it. Throws errc::environment
  // when the server refuses.
  void publish(const std::string& key, const std::string& value);

  // Task `rank`'s value of `key`: waits up to `wait` (whole seconds, at least 1) for that task
  // to publish it. std::nullopt when it did not within that time.
  std::optional<std::string> lookup(int rank, const std::string& key, std::chrono::seconds wait);

 private:
  pmix_session(std::string nspace, int rank) : nspace_(std::move(nspace)), rank_(rank) {}
  std::string nspace_;
  int rank_ = 0;
};

}  // namespace muster::launcher::rendezvous
