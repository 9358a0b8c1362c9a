// Where checkpoints are: see checkpoint_dirs.hpp.
#include "engine/checkpoint/checkpoint_dirs.hpp"

namespace muster::engine::checkpoint {
namespace fs = std::filesystem;

std::optional<fs::path> newest_checkpoint(const fs::path& root) {
  std::error_code ec;
  std::optional<fs::path> newest;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_directory() || !name.starts_with("step-") ||
        entry.path().extension() == ".partial")
      continue;
    if (!fs::exists(entry.path() / "trainer_state.json")) continue;
    if (!newest || entry.path().filename() > newest->filename()) newest = entry.path();
  }
  return newest;
}

std::optional<fs::path> checkpoint_to_load(const fs::path& load) {
  std::error_code ec;
  if (fs::exists(load / "model.safetensors", ec) ||
      fs::exists(load / "model.safetensors.index.json", ec))
    return load;
  return newest_checkpoint(load);
}

bool same_dir(const fs::path& a, const fs::path& b) {
  const auto plain = [](const fs::path& p) {
    std::error_code ec;
    auto out = fs::absolute(p, ec).lexically_normal();
    if (!out.has_filename() && out.has_parent_path() && out != out.root_path())
      out = out.parent_path();
    return out;
  };
  return !a.empty() && !b.empty() && plain(a) == plain(b);
}

fs::path checkpoint_root(const job_config& config, const fs::path& run_dir) {
  return config.checkpoint.dir.empty() ? run_dir / "checkpoints" : fs::path(config.checkpoint.dir);
}

}  // namespace muster::engine::checkpoint
