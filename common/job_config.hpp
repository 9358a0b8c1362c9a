// The job file: what a user writes to describe one training job (`muster run job.toml`).
// A plain struct with in-class defaults, its schema (one row per TOML key) and validate().
// etc/examples/job.toml shows every key with its default; a test keeps the two in step.
//
// Later issues add sections (parallel, model, train, ...): each adds its struct here, its rows
// to job_config_schema(), its checks to validate(), and its keys to the example.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "common/config_schema.hpp"

namespace muster {

struct job_section {
  std::string name = "muster-job";  // names the run directory; letters, digits, '.', '_', '-'
};

struct launch_section {
  int nproc = 0;                          // ranks per node; 0 = one per GPU, or 2 without GPUs
  std::string runs_dir = "./muster-runs";  // where run directories are created
};

struct log_section {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
};

struct job_config {
  job_section job;
  launch_section launch;
  log_section log;
};

// One row per key of the job file, in the order the example file shows them.
std::span<const config::field<job_config>> job_config_schema();

// A loaded job config and where each of its values came from.
struct loaded_job_config {
  job_config config;
  config::sources where;
};

// Defaults, then the TOML file (when `file` is not empty), then the overrides in order, then
// validate(). Throws errc::config with the place of the offending value.
loaded_job_config load_job_config(const std::filesystem::path& file,
                                  std::span<const std::string> overrides);

// Checks ranges and relations between values; messages name the place from `where`.
void validate(const job_config& config, const config::sources& where);

// The resolved config as TOML (what a run directory records).
std::string to_toml(const job_config& config, bool with_docs);

}  // namespace muster
