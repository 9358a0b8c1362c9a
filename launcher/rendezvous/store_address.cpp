// Finding node 0's rendezvous store: see store_address.hpp.
#include "launcher/rendezvous/store_address.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"

namespace muster::launcher::rendezvous {
namespace {

constexpr int kFirstPort = 20000;
constexpr int kPortSpan = 10000;

// The store at address:port when it answers at once and holds `identity`; else nullptr.
std::shared_ptr<tcp_store_client> probe(const std::string& address, int port,
                                        const std::string& identity) {
  try {
    auto client = std::make_shared<tcp_store_client>(address, port, milliseconds(0));
    client->set_reply_slack(milliseconds(500));  // a program that is not a store stays silent
    if (!client->check({kIdentityKey})) return nullptr;
    if (client->get(kIdentityKey, milliseconds(0)) != identity) return nullptr;
    client->set_reply_slack(milliseconds(0));
    return client;
  } catch (const error&) {
    return nullptr;  // nothing there, or not ours
  }
}

struct address_line {
  std::string address;
  int port = 0;
  std::string identity;
};

std::string format_line(const std::string& address, int port, const store_identity& identity) {
  return fmt::format("{} {} {}", address, port, identity.str());
}

std::optional<address_line> parse_line(const std::string& line) {
  std::istringstream fields(line);
  address_line a;
  if (!(fields >> a.address >> a.port)) return std::nullopt;
  std::getline(fields >> std::ws, a.identity);
  return a;
}

// The address file's one line, or nothing while it is missing.
std::optional<address_line> read_address_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return parse_line(line);
}

// PMIx is a shortcut: when it cannot carry the line, the file and the derived ports still do.
void publish_through_pmix(pmix_session& pmix, const std::string& line) {
  if (pmix.rank() != 0) {  // the others read rank 0's key (srun -m arbitrary can do this)
    log::get("launcher")->info("rendezvous: node 0's launcher is PMIx rank {}, not 0: the "
                               "others find the store through the address file or the port",
                               pmix.rank());
    return;
  }
  try {
    pmix.publish(kPmixStoreKey, line);
  } catch (const error& e) {
    log::get("launcher")->warn("rendezvous: {}; the others find the store through the address "
                               "file or the port", e.what());
  }
}

// The store a line names, when it is this step's and answers.
std::shared_ptr<tcp_store_client> probe_line(const std::optional<address_line>& line,
                                             const std::string& identity) {
  if (!line || line->identity != identity) return nullptr;
  return probe(line->address, line->port, identity);
}

}  // namespace

std::string store_identity::str() const {
  return fmt::format("job {} step {} restart {}", job_id, step_id, restart);
}

std::vector<int> derived_ports(std::uint32_t job_id, std::uint32_t step_id) {
  // Knuth's multiplicative hash spreads consecutive job ids over the range.
  std::uint64_t h = (static_cast<std::uint64_t>(job_id) * 2654435761ULL + step_id * 40503ULL) %
                    static_cast<std::uint64_t>(kPortSpan - kDerivedPortCount);
  std::vector<int> ports;
  for (int k = 0; k < kDerivedPortCount; ++k) ports.push_back(kFirstPort + static_cast<int>(h) + k);
  return ports;
}

hosted_store host_store(const store_identity& identity, const std::string& address,
                        const std::filesystem::path& address_file, pmix_session* pmix) {
  hosted_store hosted;
  for (int port : derived_ports(identity.job_id, identity.step_id)) {
    try {
      hosted.server = std::make_unique<tcp_store_server>("0.0.0.0", port);
      hosted.derived = true;
      break;
    } catch (const error&) {
      // taken: the next one
    }
  }
  if (!hosted.server) hosted.server = std::make_unique<tcp_store_server>("0.0.0.0", 0);
  hosted.port = hosted.server->port();
  hosted.server->store()->set(kIdentityKey, identity.str());
  if (pmix) publish_through_pmix(*pmix, format_line(address, hosted.port, identity));

  auto temp = address_file;
  temp += fmt::format(".{}.tmp", ::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << format_line(address, hosted.port, identity) << '\n';
    out.close();
    MUSTER_CHECK(out.good(), errc::io,
                 "rendezvous: cannot write the store's address to {}; check that the run "
                 "directory is writable and the disk is not full",
                 temp.string());
  }
  std::error_code ec;
  std::filesystem::rename(temp, address_file, ec);
  MUSTER_CHECK(!ec, errc::io, "rendezvous: cannot rename {} to {}: {}", temp.string(),
               address_file.string(), ec.message());
  return hosted;
}

found_store find_store(const store_identity& identity, const std::string& address,
                       const std::filesystem::path& address_file,
                       std::chrono::steady_clock::time_point deadline,
                       const std::function<bool()>& stop, pmix_session* pmix) {
  const std::string want = identity.str();
  const auto ports = derived_ports(identity.job_id, identity.step_id);
  found_store found;
  for (int pass = 0;; ++pass) {
    // PMIx waits up to 1 s for node 0's line; after two misses (node 0 may have no PMIx) it is
    // asked again only every 40th pass, about once a second between the file and the ports.
    if (pmix && (pass < 2 || pass % 40 == 0)) {
      if (auto text = pmix->lookup(0, kPmixStoreKey, std::chrono::seconds(1))) {
        auto line = parse_line(*text);
        if (auto client = probe_line(line, want))
          return {client, line->address, line->port, "PMIx"};
      }
    }
    if (auto line = read_address_file(address_file)) {
      if (auto client = probe_line(line, want)) {
        return {client, line->address, line->port,
                fmt::format("the address file {}", address_file.string())};
      }
    }
    for (int port : ports)
      if (auto client = probe(address, port, want))
        return {client, address, port, fmt::format("derived port {}", port)};
    if ((stop && stop()) || std::chrono::steady_clock::now() >= deadline) return found;
    std::this_thread::sleep_for(milliseconds(25));
  }
}

std::shared_ptr<tcp_store_client> connect_store(const std::string& address, int port) {
  return std::make_shared<tcp_store_client>(address, port, milliseconds(2000));
}

}  // namespace muster::launcher::rendezvous
