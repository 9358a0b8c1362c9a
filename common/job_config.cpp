// The job file's schema, loading and validation: see job_config.hpp.
#include "common/job_config.hpp"

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/run_dir.hpp"

namespace muster {
namespace {

using config::field;
#define FIELD(member, key, doc) MUSTER_CONFIG_FIELD(job_config, member, key, doc)

const field<job_config> kSchema[] = {
    FIELD(job.name, "job.name",
          "name of the job; names its run directory (letters, digits, '.', '_', '-'; not "
          "starting with '.' or '-')"),
    FIELD(launch.nproc, "launch.nproc",
          "ranks per node; 0 means one per GPU, or 2 on a machine without GPUs"),
    FIELD(launch.runs_dir, "launch.runs_dir",
          "directory where run directories (<runs_dir>/<run_id>/) are created"),
    FIELD(log.level, "log.level",
          "log level: trace, debug, info, warn, error, critical or off (MUSTER_LOG_LEVEL wins)"),
};

#undef FIELD

}  // namespace

std::span<const config::field<job_config>> job_config_schema() { return kSchema; }

void validate(const job_config& c, const config::sources& where) {
  using config::place_of;
  try {
    store::check_file_component("the name", c.job.name);  // it names the run directory
  } catch (const error& e) {
    MUSTER_THROW(errc::config, "{}: job.name: {}; e.g. job.name = \"moe-pretrain\"",
                 place_of(where, "job.name"), e.what());
  }
  MUSTER_CHECK(c.launch.nproc >= 0, errc::config,
               "{}: launch.nproc: {} is negative; use the number of ranks per node, or 0 for one "
               "per GPU",
               place_of(where, "launch.nproc"), c.launch.nproc);
  MUSTER_CHECK(!c.launch.runs_dir.empty(), errc::config,
               "{}: launch.runs_dir is empty; name a directory, e.g. launch.runs_dir = "
               "\"./muster-runs\"",
               place_of(where, "launch.runs_dir"));
  log::check_level(c.log.level, errc::config,
                   fmt::format("{}: log.level", place_of(where, "log.level")));
}

loaded_job_config load_job_config(const std::filesystem::path& file,
                                  std::span<const std::string> overrides) {
  loaded_job_config loaded;
  auto fields = config::bind_fields(loaded.config, job_config_schema());
  if (!file.empty()) config::load_file(file, fields, loaded.where);
  for (const auto& assignment : overrides) config::apply_override(assignment, fields, loaded.where);
  validate(loaded.config, loaded.where);
  return loaded;
}

std::string to_toml(const job_config& config, bool with_docs) {
  job_config copy = config;  // bind_fields needs a mutable object; the output is the same
  return config::to_toml(config::bind_fields(copy, job_config_schema()), with_docs);
}

}  // namespace muster
