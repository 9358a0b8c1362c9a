// Run directory layout and run ids: see run_dir.hpp.
#include "common/run_dir.hpp"

#include <algorithm>
#include <ctime>
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

bool is_safe_component(std::string_view value) {
  return !value.empty() && value.size() <= kMaxComponentLength && value.front() != '.' &&
         value.front() != '-' && std::all_of(value.begin(), value.end(), is_safe_char);
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
  MUSTER_CHECK(!value.empty() && value.size() <= kMaxComponentLength, errc::invalid_input,
               "{} '{}': must be 1 to {} characters", what, value, kMaxComponentLength);
  MUSTER_CHECK(value.front() != '.' && value.front() != '-', errc::invalid_input,
               "{} '{}': must not start with '.' or '-'", what, value);
  auto bad = std::find_if_not(value.begin(), value.end(), is_safe_char);
  MUSTER_CHECK(bad == value.end(), errc::invalid_input,
               "{} '{}': character '{}' at offset {} is not allowed in a file name; use only "
               "letters, digits, '.', '_' and '-'",
               what, value, *bad, bad - value.begin());
}

run_paths::run_paths(const std::filesystem::path& runs_dir, std::string_view run_id)
    : dir_(runs_dir / run_id), run_id_(run_id) {
  check_file_component("run id", run_id);
}

run_paths::run_paths(const std::filesystem::path& run_dir)
    : dir_(run_dir.has_filename() ? run_dir : run_dir.parent_path()),
      run_id_(dir_.filename().string()) {}

std::filesystem::path run_paths::node_db(std::string_view hostname) const {
  check_file_component("hostname", hostname);
  return dir_ / fmt::format("{}{}{}", kNodePrefix, hostname, kNodeSuffix);
}

std::filesystem::path run_paths::job_config() const { return dir_ / "job.toml"; }

std::filesystem::path run_paths::logs_dir() const { return dir_ / "logs"; }

std::filesystem::path run_paths::rank_log(std::int64_t rank) const {
  MUSTER_CHECK(rank >= 0, errc::invalid_input, "rank {}: a rank is never negative", rank);
  return logs_dir() / fmt::format("rank-{}.log", rank);
}

void run_paths::create() const {
  for (const auto& dir : {dir_, logs_dir()}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    MUSTER_CHECK(!ec, errc::io,
                 "cannot create run directory {}: {}; check that runs_dir exists and that this "
                 "user can write to it",
                 dir.string(), ec.message());
  }
}

std::vector<std::filesystem::path> run_paths::node_dbs() const {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  std::filesystem::directory_iterator it(dir_, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (!node_db_host(it->path()).empty()) files.push_back(it->path());
  }
  MUSTER_CHECK(!ec, errc::io, "cannot list run directory {}: {}", dir_.string(), ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::string node_db_host(const std::filesystem::path& file) {
  std::string name = file.filename().string();
  if (!name.starts_with(kNodePrefix) || !name.ends_with(kNodeSuffix)) return {};
  std::string host = name.substr(kNodePrefix.size());
  host.resize(host.size() < kNodeSuffix.size() ? 0 : host.size() - kNodeSuffix.size());
  return is_safe_component(host) ? host : std::string();
}

}  // namespace muster::store
