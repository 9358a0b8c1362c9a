// checkpoint_dirs: which checkpoint a checkpoint.load names, on real directories.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine/checkpoint/checkpoint_dirs.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace muster::engine::checkpoint;

TEST_CASE("a directory is the same written with a trailing slash, relative or absolute",
          "[checkpoint_dirs]") {
  muster::test::temp_dir dir;
  const auto before = fs::current_path();
  fs::current_path(dir.path());
  CHECK(same_dir("ckpt/", "ckpt"));
  CHECK(same_dir("./ckpt", dir.path() / "ckpt"));
  CHECK(same_dir("a/../ckpt//", "ckpt"));
  CHECK_FALSE(same_dir("ckpt", "ckpt2"));
  CHECK_FALSE(same_dir("", "ckpt"));
  CHECK(same_dir("/", "/"));
  fs::current_path(before);
}

TEST_CASE("checkpoint.load takes a checkpoint, or the newest complete step under a folder",
          "[checkpoint_dirs]") {
  muster::test::temp_dir dir;
  const auto root = dir.path() / "ckpt";
  for (const char* step : {"step-00000002", "step-00000010", "step-00000012.partial"}) {
    fs::create_directories(root / step);
    muster::test::write_file(root / step / "trainer_state.json", "{}");
  }
  fs::create_directories(root / "step-00000011");  // no trainer_state.json: unfinished
  CHECK(checkpoint_to_load(root) == root / "step-00000010");
  muster::test::write_file(root / "step-00000002" / "model.safetensors", "");
  CHECK(checkpoint_to_load(root / "step-00000002") == root / "step-00000002");
  CHECK_FALSE(checkpoint_to_load(dir.path() / "empty"));
}
