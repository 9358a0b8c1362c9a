// `muster hostnames` and `muster hostlist`: Slurm's `scontrol show hostnames` / `show hostlist`
// without a Slurm config, and with a clear error and exit code 2 on a malformed list (scontrol
// prints its error and exits 0). The work is common/hostlist; this file is argument wiring and
// fast output (one buffered write, no flush per host).
// Not here: sorting or de-duplicating (`scontrol show hostlistsorted`).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/hostlist.hpp"
#include "launcher/cli/verbs.hpp"

namespace muster::cli {
namespace {

// Writes all of text to stdout (fd 1), retrying short writes; throws errc::io on failure.
void write_stdout(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) MUSTER_THROW(errc::io, "cannot write to standard output: {}", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

// Where `muster hostnames` without LIST reads the list, in order (as scontrol does).
constexpr const char* kNodelistVariables[] = {"SLURM_JOB_NODELIST", "SLURM_NODELIST"};

// The list given on the command line, or else the first of kNodelistVariables that is set.
std::string hostnames_source(const CLI::Option* given, const std::string& list) {
  if (given->count() > 0) return list;
  for (const char* name : kNodelistVariables)
    if (const char* env = std::getenv(name)) return env;
  MUSTER_THROW(errc::environment,
               "hostnames: no LIST given and neither {} nor {} is set; pass a hostlist such as "
               "gpu[01-04], or run inside a Slurm job",
               kNodelistVariables[0], kNodelistVariables[1]);
}

int print_hostnames(const std::string& list) {
  hostlist_size size = measure_hostlist(list);  // checks the limits before anything is built
  std::string out;
  out.reserve(size.name_bytes + size.num_hosts);
  for_each_host(list, [&out](std::string_view host) {
    out.append(host);
    out.push_back('\n');
  });
  write_stdout(out);
  return kExitOk;
}

// Every argument is a hostlist (a host, a comma list or a bracketed range); the hosts of all of
// them, in order, are compressed into one.
int print_hostlist(const std::vector<std::string>& args) {
  std::vector<std::string> hosts;
  std::size_t name_bytes = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    hostlist_size size = measure_hostlist(args[i]);  // each within the limits, so no overflow
    name_bytes += size.name_bytes;
    if (hosts.size() + size.num_hosts > kMaxHostlistHosts || name_bytes > kMaxHostlistNameBytes)
      MUSTER_THROW(errc::invalid_input,
                   "hostlist: arguments 1 to {} name {} hosts and {} characters of host names, "
                   "more than the limit of {} hosts or {} characters",
                   i + 1, hosts.size() + size.num_hosts, name_bytes, kMaxHostlistHosts,
                   kMaxHostlistNameBytes);
    std::vector<std::string> more = expand_hostlist(args[i]);
    hosts.insert(hosts.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  write_stdout(compress_hostlist(hosts) + "\n");
  return kExitOk;
}

}  // namespace

void add_hostlist_verbs(CLI::App& app, verb_action& run) {
  auto list = std::make_shared<std::string>();
  CLI::App* hostnames =
      app.add_subcommand("hostnames",
                         "Print the hosts of a Slurm hostlist, one per line (like scontrol show "
                         "hostnames); without LIST, the hosts of SLURM_JOB_NODELIST, or of "
                         "SLURM_NODELIST when that is unset");
  CLI::Option* given =
      hostnames->add_option("LIST", *list, "hostlist expression, e.g. gpu[01-04],login1");
  hostnames->callback([&run, list, given] {
    run = [list, given] { return print_hostnames(hostnames_source(given, *list)); };
  });

  auto hosts = std::make_shared<std::vector<std::string>>();
  CLI::App* hostlist =
      app.add_subcommand("hostlist",
                         "Print host names compressed into a Slurm hostlist (like scontrol show "
                         "hostlist); never sorts");
  hostlist->add_option("HOST", *hosts, "host names, comma lists or hostlists, in order")
      ->required();
  hostlist->callback([&run, hosts] { run = [hosts] { return print_hostlist(*hosts); }; });
}

}  // namespace muster::cli
