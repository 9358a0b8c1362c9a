// The launchers' checks of a muster-train job: see engine_precheck.hpp.
#include "launcher/engine_precheck.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "common/error.hpp"
#include "common/train_limits.hpp"
#include "common/writable_dir.hpp"
#include "engine/checkpoint/checkpoint_dirs.hpp"
#include "engine/data/job_documents.hpp"
#include "launcher/launch_policy.hpp"

namespace muster::launcher {
namespace {

// Why checkpoint.load = `load` names no checkpoint muster-train can load, or "": a step
// directory misnamed is said with the newest there is ("step-3" for step-00000003).
std::string no_checkpoint(const std::filesystem::path& load) {
  namespace ck = engine::checkpoint;
  std::error_code ec;
  if (std::filesystem::is_directory(load, ec))
    return ck::checkpoint_to_load(load)
               ? ""
               : "holds neither model.safetensors (or its .index.json) nor a complete step-N "
                 "directory";
  if (std::filesystem::exists(load, ec)) return "not a directory";
  if (const auto newest = ck::newest_checkpoint(load.parent_path()))
    return fmt::format("does not exist (the newest checkpoint there is {})", newest->string());
  return "does not exist";
}

}  // namespace

void check_engine_job(const job_config& config, const std::vector<std::string>& argv) {
  if (!runs_builtin_engine(argv)) return;
  check_train_limits(config);
  engine::data::open_job_documents(config);
  // the job's own checkpoint.dir, empty on a first run, starts from scratch (as Megatron's
  // --load of its --save folder does)
  const auto& load = config.checkpoint.load;
  if (!load.empty() && !engine::checkpoint::same_dir(load, config.checkpoint.dir))
    if (const auto why = no_checkpoint(load); !why.empty())
      MUSTER_THROW(errc::invalid_input,
                   "checkpoint.load = {}: {}; name a checkpoint directory (step-N), the folder "
                   "they are in (for the newest), or a Hugging Face model directory, or leave it "
                   "empty to resume from the newest under checkpoint.dir",
                   load, why);
  // found now, not at the first save, checkpoint.interval steps in
  if (const auto& dir = config.checkpoint.dir; !dir.empty())  // signalled saves go there too
    if (const auto why = unwritable_dir(dir); !why.empty())
      MUSTER_THROW(errc::invalid_input,
                   "checkpoint.dir = {}: {}; muster-train could save no checkpoint there: "
                   "choose a folder this user can write, or leave it empty for the run "
                   "directory's",
                   dir, why);
}

}  // namespace muster::launcher
