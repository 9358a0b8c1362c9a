// Run directory layout and run ids: see run_dir.hpp.
#include "common/run_dir.hpp"

#include <algorithm>
#include <ctime>
#include <optional>
#include <random>
#include <system_error>

#include "common/error.hpp"

namespace muster::store {
namespace {

constexpr size_t kMaxNameLength = 48;
constexpr size_t kMaxComponentLength = 128;
constexpr std::string_view kNodePrefix = "node-";
constexpr std::string_view kNodeSuffix = ".db";

bool is_safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

// `value` for a message: printable ASCII as it is, '\\' doubled, every other byte (control
// characters, NUL, bytes of UTF-8 sequences) as \xHH; cut after kMaxShown characters.
std::string escaped(std::string_view value) {
  constexpr size_t kMaxShown = 64;
  std::string text;
  for (size_t i = 0; i < value.size(); ++i) {
    if (i == kMaxShown) return text + fmt::format("... ({} bytes)", value.size());
    auto byte = static_cast<unsigned char>(value[i]);
    if (byte == '\\') {
      text += "\\\\";
    } else if (byte >= 0x20 && byte < 0x7f) {
      text += static_cast<char>(byte);
    } else {
      text += fmt::format("\\x{:02x}", byte);
    }
  }
  return text;
}

// The one rule for a file-name component: what is wrong with `value`, or nothing.
std::optional<std::string> component_problem(std::string_view value) {
  if (value.empty() || value.size() > kMaxComponentLength) {
    return fmt::format("must be 1 to {} characters", kMaxComponentLength);
  }
  if (value.front() == '.' || value.front() == '-') return "must not start with '.' or '-'";
  auto bad = std::find_if_not(value.begin(), value.end(), is_safe_char);
  if (bad != value.end()) {
    return fmt::format("character '{}' at offset {} is not allowed in a file name; use only "
                       "letters, digits, '.', '_' and '-'",
                       escaped(std::string_view(&*bad, 1)), bad - value.begin());
  }
  return std::nullopt;
}

std::string sanitise_name(std::string_view job_name) {
  std::string name;
  for (char c : job_name) {
    if (name.empty() && (c == '.' || c == '-')) continue;
    name += is_safe_char(c) ? c : '_';
    if (name.size() == kMaxNameLength) break;
  }
  return name.empty() ? "run" : name;
}

// "YYYYMMDD-HHMMSS" in UTC.
std::string utc_stamp(std::chrono::system_clock::time_point when) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &utc);
  return text;
}

// The deepest existing ancestor of `dir` (the directory a create_directories of `dir` had to
// write in first), or `dir` itself when it exists.
std::filesystem::path existing_ancestor(const std::filesystem::path& dir) {
  std::filesystem::path at = dir;
  std::error_code ec;
  while (!std::filesystem::exists(at, ec) && at.has_relative_path()) at = at.parent_path();
  return at.empty() ? std::filesystem::path(".") : at;
}

// Why create_directories(dir) failed with `ec`, and what to do. The run directory and any
// missing parents (launch.runs_dir among them) are created as needed, so the cause is where
// creating stopped.
std::string create_advice(const std::filesystem::path& dir, std::error_code ec) {
  std::string at = existing_ancestor(dir).string();
  std::string fix = "or set launch.runs_dir to a directory this user can write";
  if (ec == std::errc::not_a_directory || ec == std::errc::file_exists) {
    return fmt::format("{} is a file, not a directory, and is in the way: move it {}", at, fix);
  }
  if (ec == std::errc::permission_denied || ec == std::errc::operation_not_permitted) {
    return fmt::format("this user may not create directories in {}: fix its permissions {}", at,
                       fix);
  }
  if (ec == std::errc::read_only_file_system) {
    return fmt::format("the file system holding {} is mounted read-only: set launch.runs_dir to "
                       "a directory on a writable one", at);
  }
  if (ec == std::errc::no_space_on_device) {
    return fmt::format("the file system holding {} is full: free space there {}", at, fix);
  }
  return fmt::format("check that no file is in the way under {}, that its file system is "
                     "writable, and that this user may create directories there; fix that {}",
                     at, fix);
}

// What to do when a run directory cannot be listed with `ec`.
std::string list_advice(std::error_code ec) {
  if (ec == std::errc::no_such_file_or_directory) {
    return "check the run directory's path (runs are under launch.runs_dir, named by run id)";
  }
  if (ec == std::errc::not_a_directory) return "that path is a file, not a run directory";
  if (ec == std::errc::permission_denied) {
    return "this user may not read it: read the run as its owner, or ask the owner to grant "
           "read and search permission";
  }
  return "check that it is a directory this user can read";
}

}  // namespace

std::string make_run_id(std::string_view job_name, std::chrono::system_clock::time_point when,
                        std::uint32_t suffix) {
  return fmt::format("{}-{}-{:04x}", sanitise_name(job_name), utc_stamp(when), suffix & 0xffffu);
}

std::string make_run_id(std::string_view job_name, std::chrono::system_clock::time_point when) {
  std::random_device entropy;
  return make_run_id(job_name, when, entropy());
}

void check_file_component(std::string_view what, std::string_view value) {
  if (auto problem = component_problem(value)) {
    MUSTER_THROW(errc::invalid_input, "{} '{}': {}", what, escaped(value), *problem);
  }
}

run_paths::run_paths(const std::filesystem::path& runs_dir, std::string_view run_id)
    // absolute: the stores, the daemon and the ranks record it, each with its own working
    // directory ("./muster-runs" means nothing outside the launcher's)
    : dir_(std::filesystem::absolute(runs_dir).lexically_normal() / run_id), run_id_(run_id) {
  check_file_component("run id", run_id);
}

run_paths::run_paths(const std::filesystem::path& run_dir)
    : dir_(run_dir.has_filename() ? run_dir : run_dir.parent_path()),
      run_id_(dir_.filename().string()) {}

std::filesystem::path run_paths::node_db(std::string_view hostname) const {
  check_file_component("hostname", hostname);
  return dir_ / fmt::format("{}{}{}", kNodePrefix, hostname, kNodeSuffix);
}

std::filesystem::path run_paths::launcher_lock(std::string_view hostname) const {
  check_file_component("hostname", hostname);
  return logs_dir() / fmt::format("launcher-{}.lock", hostname);
}

std::filesystem::path run_paths::job_config() const { return dir_ / "job.toml"; }

std::filesystem::path run_paths::logs_dir() const { return dir_ / "logs"; }

namespace {

std::filesystem::path rank_file(const std::filesystem::path& logs, std::int64_t rank,
                                std::string_view suffix) {
  MUSTER_CHECK(rank >= 0, errc::invalid_input, "rank {}: a rank is never negative", rank);
  return logs / fmt::format("rank-{}{}", rank, suffix);
}

}  // namespace

std::filesystem::path run_paths::rank_log(std::int64_t rank) const {
  return rank_file(logs_dir(), rank, ".log");
}
std::filesystem::path run_paths::rank_error_file(std::int64_t rank) const {
  return rank_file(logs_dir(), rank, ".error.json");
}
std::filesystem::path run_paths::rank_heartbeat_file(std::int64_t rank) const {
  return rank_file(logs_dir(), rank, ".heartbeat");
}
std::filesystem::path run_paths::rank_steps_file(std::int64_t rank) const {
  return rank_file(logs_dir(), rank, ".steps");
}

void run_paths::create() const {
  for (const auto& dir : {dir_, logs_dir()}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    MUSTER_CHECK(!ec, errc::io, "cannot create run directory {}: {}; {}", dir.string(),
                 ec.message(), create_advice(dir, ec));
  }
}

std::vector<std::filesystem::path> run_paths::node_dbs() const {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  std::filesystem::directory_iterator it(dir_, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (!node_db_host(it->path()).empty()) files.push_back(it->path());
  }
  MUSTER_CHECK(!ec, errc::io, "cannot list run directory {}: {}; {}", dir_.string(),
               ec.message(), list_advice(ec));
  std::sort(files.begin(), files.end());
  return files;
}

std::string node_db_host(const std::filesystem::path& file) {
  std::string name = file.filename().string();
  if (!name.starts_with(kNodePrefix) || !name.ends_with(kNodeSuffix)) return {};
  std::string host = name.substr(kNodePrefix.size());
  host.resize(host.size() < kNodeSuffix.size() ? 0 : host.size() - kNodeSuffix.size());
  return component_problem(host) ? std::string() : host;
}

}  // namespace muster::store
