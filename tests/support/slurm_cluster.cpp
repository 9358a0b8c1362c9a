// A real Slurm on loopback for one test: see slurm_cluster.hpp.
#include "tests/support/slurm_cluster.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace muster::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr auto kStartTimeout = 15s;     // per daemon; each takes well under a second here
constexpr auto kStopTimeout = 10s;      // SIGTERM to SIGKILL
constexpr auto kJobsGoneTimeout = 20s;  // KillWait (5 s) and the epilogs, with room
constexpr auto kPoll = 20ms;

const char* const kPrograms[] = {"slurmctld", "slurmd", "srun",  "sbatch", "scontrol",
                                 "scancel",   "squeue", "sinfo", "munge",  "munged"};

// Whether nothing listens on (or holds) TCP `port` on any address.
bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Three consecutive free ports in [10000, 19000): below muster's derived rendezvous ports
// [20000, 30000) and Linux's ephemeral range, starting at a place this process's pid picks so
// that tests running at the same time start far apart.
int free_port_triple() {
  const auto pid = static_cast<long>(::getpid());
  for (long attempt = 0; attempt < 200; ++attempt) {
    const int base = 10000 + static_cast<int>((pid + attempt * 7919) % 3000) * 3;
    if (port_free(base) && port_free(base + 1) && port_free(base + 2)) return base;
  }
  throw std::runtime_error("slurm_cluster: no three free ports in [10000, 19000)");
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// This process's environment minus everything that would send a Slurm command elsewhere.
env_change command_env(const fs::path& conf) {
  static const char* const kDropped[] = {"SLURM_",  "SBATCH_", "SRUN_",   "SALLOC_",
                                         "SQUEUE_", "SINFO_",  "SCANCEL_"};
  env_change env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    for (const char* prefix : kDropped)
      if (starts_with(name, prefix)) env.unset.push_back(name);
  }
  env.set["SLURM_CONF"] = conf.string();
  return env;
}

std::string last_lines(const fs::path& file, std::size_t num_lines) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::ostringstream out;
  const std::size_t first = lines.size() > num_lines ? lines.size() - num_lines : 0;
  for (std::size_t i = first; i < lines.size(); ++i) out << "  " << lines[i] << "\n";
  return out.str();
}

void make_dir(const fs::path& dir, fs::perms perms) {
  fs::create_directories(dir);
  fs::permissions(dir, perms);
}

}  // namespace

std::string slurm_cluster::program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs =
      std::string(path ? path : "") + ":/usr/sbin:/sbin:/usr/local/sbin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error(name + " is not installed (Debian: apt-get install slurm-wlm munge)");
}

std::optional<std::string> slurm_cluster::unavailable() {
  if (::geteuid() != 0)
    return "not root: the loopback Slurm runs slurmctld and slurmd as root (SlurmUser=root)";
  for (const char* name : kPrograms) {
    try {
      program(name);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
  }
  return std::nullopt;
}

const std::vector<std::string>& slurm_cluster::nodes() {
  static const std::vector<std::string> names = {"gpu-a01", "gpu-a02"};
  return names;
}

std::vector<pid_t> slurm_cluster::daemon_pids() const {
  std::vector<pid_t> pids;
  for (const auto& d : daemons_)
    if (d.pid > 0) pids.push_back(d.pid);
  return pids;
}

slurm_cluster::slurm_cluster(const slurm_cluster_options& options)
    : dir_("muster-slurm"), options_(options) {
  if (options_.cred_expire_s < 5)
    throw std::invalid_argument("slurm_cluster: cred_expire_s below 5 (Slurm would take 120)");
  conf_ = dir_.path() / "slurm.conf";
  env_ = command_env(conf_);
  const int base = free_port_triple();
  ctld_port_ = base;
  node_ports_ = {base + 1, base + 2};
  // Job ids of this process's own (up to 60,000,000, below Slurm's MaxJobId): two clusters
  // running at once never hand out the same id, so muster's id-derived ports differ too.
  first_job_id_ = 10000000u + static_cast<std::uint32_t>(::getpid() % 500000) * 100u;
  try {
    bring_up();
  } catch (...) {
    stop_all();
    throw;
  }
}

slurm_cluster::~slurm_cluster() {
  stop_all();
}

void slurm_cluster::bring_up() {
  for (const char* sub :
       {"state", "log", "spool/gpu-a01", "spool/gpu-a02", "tmp/gpu-a01", "tmp/gpu-a02"})
    fs::create_directories(dir_.path() / sub);
  if (run_process({program("munge"), "-n"}).exit_code != 0) start_munged();
  write_config();

  start("slurmctld", {program("slurmctld"), "-D", "-i", "-f", conf_.string()});
  wait_until("slurmctld answering scontrol ping", [this] {
    return command({"scontrol", "ping"}).out.find("is UP") != std::string::npos;
  });
  for (const auto& node : nodes())
    start("slurmd-" + node, {program("slurmd"), "-D", "-N", node, "-f", conf_.string()});
  wait_until("both nodes idle in sinfo", [this] {
    const auto out = command({"sinfo", "-h", "-N", "-t", "idle", "-o", "%N"}).out;
    std::set<std::string> idle;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) idle.insert(line);
    for (const auto& node : nodes())
      if (!idle.count(node)) return false;
    return true;
  });
}

// A private munged: its own key (1024 random bytes, mode 0400) and socket. munged insists that
// every directory above its socket lets everyone search it, hence the 0711 and 0755.
void slurm_cluster::start_munged() {
  fs::permissions(dir_.path(),
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const fs::path run = dir_.path() / "munge";
  make_dir(run, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                    fs::perms::others_read | fs::perms::others_exec);
  const fs::path key = dir_.path() / "munge.key";
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string bytes(1024, '\0');
    if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
      throw std::runtime_error("slurm_cluster: cannot read /dev/urandom for the munge key");
    write_file(key, bytes);
    fs::permissions(key, fs::perms::owner_read);
  }
  munge_socket_ = run / "munge.socket";
  start("munged", {program("munged"), "--foreground", "--socket=" + munge_socket_.string(),
                   "--key-file=" + key.string(), "--pid-file=" + (run / "munged.pid").string(),
                   "--log-file=" + (dir_.path() / "log" / "munged.log").string(),
                   "--seed-file=" + (run / "munged.seed").string()});
  wait_until("munged answering munge -n", [this] {
    return run_process({program("munge"), "-n", "--socket=" + munge_socket_.string()}).exit_code ==
           0;
  });
}

void slurm_cluster::write_config() const {
  const std::string d = dir_.path().string();
  std::ofstream conf(conf_);
  conf << "# written by tests/support/slurm_cluster.cpp for one test\n"
       << "ClusterName=mustertest\n"
       << "SlurmctldHost=localhost\n"
       << "SlurmUser=root\n"
       << "SlurmdUser=root\n"
       << "SlurmctldPort=" << ctld_port_ << "\n"
       << "AuthType=auth/munge\n"
       << "CredType=cred/munge\n"
       << "AuthInfo=cred_expire=" << options_.cred_expire_s;
  if (!munge_socket_.empty()) conf << ",socket=" << munge_socket_.string();
  conf << "\n"
       << "StateSaveLocation=" << d << "/state\n"
       << "SlurmdSpoolDir=" << d
       << "/spool/%n\n"
       // srun --mpi=pmix: each node's PMIx folders in its own TmpFS (one host, two slurmd)
       << "TmpFS=" << d << "/tmp/%n\n"
       << "SlurmctldPidFile=" << d << "/slurmctld.pid\n"
       << "SlurmdPidFile=" << d << "/slurmd-%n.pid\n"
       << "SlurmctldLogFile=" << d << "/log/slurmctld.log\n"
       << "SlurmdLogFile=" << d << "/log/slurmd-%n.log\n"
       << "FirstJobId=" << first_job_id_ << "\n"
       << "KillWait=5\n"
       << "MailProg=/bin/true\n"
       << "ProctrackType=proctrack/linuxproc\n"
       << "TaskPlugin=task/none\n"
       << "SelectType=select/cons_tres\n"
       << "SelectTypeParameters=CR_Core\n"
       << "SchedulerType=sched/backfill\n"
       // A batch job starts at the next scheduler pass (about 1 s), not up to 3 s later (the
       // first pass after start-up still waits 3 s: this is read there); a requeued job starts
       // within a second of becoming eligible, not at the next 60 s pass.
       << "SchedulerParameters=batch_sched_delay=0,sched_interval=1\n"
       << "MpiDefault=none\n"
       << "ReturnToService=2\n"
       << "SlurmdParameters=config_overrides\n"  // two nodes' CPUs on one machine
       << "JobAcctGatherType=jobacct_gather/none\n"
       << "AccountingStorageType=accounting_storage/none\n"
       << "JobCompType=jobcomp/none\n"
       << "SwitchType=switch/none\n";
  if (!options_.plugstack.empty()) {
    write_file(plugstack_conf(), options_.plugstack);
    conf << "PlugStackConfig=" << plugstack_conf().string() << "\n";
  }
  if (!options_.prolog.empty()) conf << "Prolog=" << options_.prolog << "\nPrologFlags=Alloc\n";
  if (!options_.epilog.empty()) conf << "Epilog=" << options_.epilog << "\n";
  for (std::size_t i = 0; i < nodes().size(); ++i)
    conf << "NodeName=" << nodes()[i]
         << " NodeHostname=localhost NodeAddr=127.0.0.1 Port=" << node_ports_[i]
         << " CPUs=2 State=UNKNOWN\n";
  conf << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
       << (options_.partition.empty() ? "" : " " + options_.partition) << "\n";
  if (!conf.flush()) throw std::runtime_error("slurm_cluster: cannot write " + conf_.string());
}

pid_t slurm_cluster::start(const std::string& name, std::vector<std::string> argv) {
  const pid_t pid = spawn_logged(argv, env_, dir_.path() / "log" / (name + ".out"));
  daemons_.push_back({name, pid});
  return pid;
}

template <class Ready>
void slurm_cluster::wait_until(const std::string& what, Ready ready) {
  const auto deadline = clock_type::now() + kStartTimeout;
  while (!ready()) {
    for (auto& d : daemons_) {
      auto ended = d.pid > 0 ? try_wait_process(d.pid) : std::nullopt;
      if (!ended) continue;
      d.pid = -1;  // reaped here: stop_all must not signal or wait for it again
      throw std::runtime_error(
          "slurm_cluster: " + d.name + " exited (code " + std::to_string(ended->exit_code) +
          ", signal " + std::to_string(ended->signal) + ") before " + what + "\n" + log_tail());
    }
    if (clock_type::now() > deadline)
      throw std::runtime_error("slurm_cluster: no " + what + " within 15 s\n" + log_tail());
    std::this_thread::sleep_for(kPoll);
  }
}

process_result slurm_cluster::command(std::vector<std::string> argv) const {
  argv.at(0) = program(argv[0]);
  return run_process(argv, env_);
}

bool wait_for(const std::function<bool()>& done, clock_type::duration limit) {
  const auto deadline = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() > deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

namespace {

std::map<std::string, std::string> fields_of(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream words(text);
  for (std::string word; words >> word;)
    if (auto eq = word.find('='); eq != std::string::npos && eq > 0)
      fields.emplace(word.substr(0, eq), word.substr(eq + 1));
  return fields;
}

}  // namespace

std::map<std::string, std::string> slurm_cluster::job_fields(std::uint32_t job_id) const {
  return fields_of(command({"scontrol", "show", "job", "-o", std::to_string(job_id)}).out);
}

std::string slurm_cluster::job_field(std::uint32_t job_id, const std::string& name) const {
  const auto fields = job_fields(job_id);
  const auto it = fields.find(name);
  return it == fields.end() ? "(none)" : it->second;
}

bool slurm_cluster::finished(const std::string& job_state) {
  return job_state == "COMPLETED" || job_state == "FAILED" || job_state == "CANCELLED" ||
         job_state == "TIMEOUT";
}

std::map<std::string, std::string> slurm_cluster::node_fields(const std::string& node) const {
  return fields_of(command({"scontrol", "show", "node", "-o", node}).out);
}

std::string slurm_cluster::log_tail(std::size_t num_lines) const {
  std::ostringstream out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_.path() / "log", ec)) {
    if (fs::file_size(entry.path(), ec) == 0) continue;
    out << "--- " << entry.path().string() << " (last lines):\n"
        << last_lines(entry.path(), num_lines);
  }
  return out.str();
}

// Every job of this cluster cancelled and gone from squeue (its steps killed), so no
// slurmstepd or worker outlives the test.
void slurm_cluster::cancel_jobs() {
  auto listed = [this] {
    std::vector<std::string> ids;
    std::istringstream lines(command({"squeue", "-h", "-o", "%A"}).out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) ids.push_back(line);
    return ids;
  };
  auto ids = listed();
  if (ids.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  command(argv);
  const auto deadline = clock_type::now() + kJobsGoneTimeout;
  while (!listed().empty() && clock_type::now() < deadline) std::this_thread::sleep_for(50ms);
}

// SIGTERM to each, then SIGKILL to those still running after kStopTimeout; reaps them all.
void slurm_cluster::stop(std::vector<daemon> daemons) {
  for (const auto& d : daemons)
    if (d.pid > 0) ::kill(d.pid, SIGTERM);
  const auto deadline = clock_type::now() + kStopTimeout;
  for (auto& d : daemons) {
    while (d.pid > 0) {
      if (try_wait_process(d.pid)) {
        d.pid = -1;
      } else if (clock_type::now() > deadline) {
        ::kill(d.pid, SIGKILL);
        wait_process(d.pid);
        d.pid = -1;
      } else {
        std::this_thread::sleep_for(kPoll);
      }
    }
  }
}

void slurm_cluster::stop_all() {
  bool ctld_alive = false;
  std::vector<daemon> slurm, munge;
  for (auto& d : daemons_) {
    if (d.pid > 0 && try_wait_process(d.pid)) d.pid = -1;  // ended (and reaped) already
    if (d.pid <= 0) continue;
    ctld_alive = ctld_alive || d.name == "slurmctld";
    (d.name == "munged" ? munge : slurm).push_back(d);
  }
  try {
    if (ctld_alive) cancel_jobs();
  } catch (const std::exception&) {
    // a command that cannot run: stop the daemons all the same
  }
  stop(slurm);  // slurmctld and the slurmd together
  stop(munge);  // last: the others talk to it until they end
  daemons_.clear();
}

}  // namespace muster::test
