// The step's PMIx server: see pmix_session.hpp.
#include "launcher/rendezvous/pmix_session.hpp"

#include <pmix.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"

#if defined(__SANITIZE_ADDRESS__)
// libpmix 4.2 keeps a few bytes from PMIx_Init, PMIx_Put and PMIx_Get past PMIx_Finalize
// (pmix_rte_init, pmix_bfrops_base_value_load, pmix_hash_fetch): not ours to fix, and not
// to fail the sanitizer build's leak check for.
extern "C" const char* __lsan_default_suppressions() { return "leak:libpmix.so\n"; }
#endif

namespace muster::launcher::rendezvous {

std::unique_ptr<pmix_session> pmix_session::join_step(std::string& why) {
  if (!std::getenv("PMIX_NAMESPACE")) {
    why = "not a PMIx step (no PMIX_NAMESPACE; srun --mpi=pmix sets it)";
    return nullptr;
  }
  pmix_proc_t me;
  std::memset(&me, 0, sizeof me);
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    why = fmt::format("the step's PMIx server did not answer: PMIx_Init: {}", PMIx_Error_string(rc));
    return nullptr;
  }
  return std::unique_ptr<pmix_session>(
      new pmix_session(std::string(me.nspace, strnlen(me.nspace, PMIX_MAX_NSLEN)),
                       static_cast<int>(me.rank)));
}

pmix_session::~pmix_session() { PMIx_Finalize(nullptr, 0); }

void pmix_session::publish(const std::string& key, const std::string& value) {
  pmix_value_t v;
  std::memset(&v, 0, sizeof v);
  v.type = PMIX_STRING;
  v.data.string = const_cast<char*>(value.c_str());  // PMIx_Put copies it
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
  if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
  MUSTER_CHECK(rc == PMIX_SUCCESS, errc::environment,
               "PMIx: cannot publish {} for the other tasks of namespace {}: {}", key, nspace_,
               PMIx_Error_string(rc));
}

std::optional<std::string> pmix_session::lookup(int rank, const std::string& key,
                                                std::chrono::seconds wait) {
  pmix_proc_t whose;
  std::memset(&whose, 0, sizeof whose);
  PMIX_LOAD_PROCID(&whose, nspace_.c_str(), static_cast<pmix_rank_t>(rank));
  const auto deadline = std::chrono::steady_clock::now() + std::max(wait, std::chrono::seconds(1));
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    pmix_info_t info;
    std::memset(&info, 0, sizeof info);
    const int seconds = std::max<int>(1, static_cast<int>(left.count()));
    PMIx_Info_load(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
    pmix_value_t* value = nullptr;
    const pmix_status_t rc = PMIx_Get(&whose, key.c_str(), &info, 1, &value);
    PMIx_Value_destruct(&info.value);
    if (rc == PMIX_SUCCESS && value) {
      std::optional<std::string> text;
      if (value->type == PMIX_STRING && value->data.string) text = value->data.string;
      PMIX_VALUE_RELEASE(value);
      return text;
    }
    // A task on the same node that is committing just now answers NOT-FOUND at once, not
    // after the wait: ask again until the wait is over.
    if (rc != PMIX_ERR_NOT_FOUND || std::chrono::steady_clock::now() >= deadline) {
      log::get("launcher")->debug("PMIx: no {} from rank {} of {}: {}", key, rank, nspace_,
                                  PMIx_Error_string(rc));
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace muster::launcher::rendezvous
