// How the launchers of one Slurm step find node 0's rendezvous store without guessing a port.
//
// Node 0 (host_store) binds the store on the first free port of a short list derived from the
// job and step ids, or on a port the kernel picks when all of those are taken, and writes
// "<address> <port> <identity>" to an address file in the run directory (and publishes the same
// line through PMIx when the step has it). Every other launcher (find_store) takes the first
// that answers of:
//   1. PMIx, when srun started the step with --mpi=pmix: the line PMIx rank 0 published;
//   2. the address file, at once on a shared filesystem;
//   3. the derived ports on the store's host.
// Each is accepted only when the store it names holds this step's identity (another job's
// store, a stale file, or another program on the port is skipped).
// Not here: what the launchers say to each other (node_group.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/rendezvous/pmix_session.hpp"
#include "launcher/rendezvous/tcp_store.hpp"

namespace muster::launcher::rendezvous {

// Which step, and which start of it (a requeued job has the same ids, a higher restart).
struct store_identity {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  int restart = 0;  // SLURM_RESTART_COUNT
  // "job 123 step 0 restart 0": the value of kIdentityKey in the store.
  std::string str() const;
};

inline constexpr const char* kIdentityKey = "muster/identity";
// The PMIx key under which node 0 publishes its address line.
inline constexpr const char* kPmixStoreKey = "muster.rendezvous.store";
inline constexpr int kDerivedPortCount = 8;

// The candidate ports of a step: kDerivedPortCount consecutive ports in [20000, 30000), below
// Linux's ephemeral range, starting at a place the job and step ids choose.
std::vector<int> derived_ports(std::uint32_t job_id, std::uint32_t step_id);

struct hosted_store {
  std::unique_ptr<tcp_store_server> server;
  int port = 0;
  bool derived = false;  // on one of derived_ports(); false: a kernel-picked port
};

// Node 0: serves the store on every address of this host, on the first derived port that is
// free (else one the kernel picks), sets kIdentityKey and writes the address file (written
// beside and renamed, so a reader never sees half of it). `address` is what the others connect
// to. With `pmix` (and this task PMIx rank 0), the same line is first published under
// kPmixStoreKey; a PMIx refusal is logged, not fatal. Throws errc::io when no port can be bound
// or the file cannot be written.
hosted_store host_store(const store_identity& identity, const std::string& address,
                        const std::filesystem::path& address_file, pmix_session* pmix);

struct found_store {
  std::shared_ptr<tcp_store_client> client;  // nullptr: not found
  std::string address;
  int port = 0;
  std::string how;  // "PMIx", "the address file <path>" or "derived port <N>"
};

// Every other launcher: tries PMIx (with `pmix`: rank 0's line, waiting up to 1 s for it; after
// two misses only about once a second), the address file, then the derived ports on `address`,
// every 25 ms until `deadline`. `stop()` returning true ends the search early (a signal). Returns a
// client connected to the store holding `identity`; its client is nullptr when the deadline
// passed or stop() said so.
found_store find_store(const store_identity& identity, const std::string& address,
                       const std::filesystem::path& address_file,
                       std::chrono::steady_clock::time_point deadline,
                       const std::function<bool()>& stop, pmix_session* pmix);

// Another connection to a store already found (for the failure watch), without probing.
std::shared_ptr<tcp_store_client> connect_store(const std::string& address, int port);

}  // namespace muster::launcher::rendezvous
