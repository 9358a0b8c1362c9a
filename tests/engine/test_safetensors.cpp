// The safetensors format: a file round-trips exactly, a standard reader (Python's json and
// struct, following the format's specification) parses its header and values, malformed files
// are refused with the file named; and Hugging Face tensor names (Qwen's and Mixtral's).
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "common/error.hpp"
#include "engine/checkpoint/hf_names.hpp"
#include "engine/checkpoint/safetensors.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::engine::checkpoint;

namespace {

template <class T>
std::span<const std::byte> bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace

TEST_CASE("a safetensors file round-trips exactly and a standard reader parses it",
          "[checkpoint]") {
  muster::test::temp_dir dir;
  const std::vector<float> weight{1.5f, -2.25f, 3e-8f, 7.0f, 0.1f, -0.0f};
  const std::vector<std::int64_t> ids{1, -2, 1LL << 40};
  const std::vector<std::uint16_t> half{0x3f80, 0xc000};  // bf16 1.0, -2.0
  const auto file = dir / "model.safetensors";
  write_safetensors(file,
                    {{"model.layers.0.mlp.gate.weight", "F32", {2, 3}, bytes(weight)},
                     {"ids", "I64", {3}, bytes(ids)},
                     {"lm_head.weight", "BF16", {1, 2}, bytes(half)}},
                    {{"format", "pt"}});
  const safetensors_file in(file);
  REQUIRE(in.tensors().size() == 3);
  CHECK(in.metadata().at("format") == "pt");
  const auto& e = in.tensors().at("model.layers.0.mlp.gate.weight");
  CHECK(e.dtype == "F32");
  CHECK(e.shape == std::vector<std::int64_t>{2, 3});
  std::vector<float> back(6);
  in.read("model.layers.0.mlp.gate.weight",
          {reinterpret_cast<std::byte*>(back.data()), back.size() * sizeof(float)});
  CHECK(std::memcmp(back.data(), weight.data(), weight.size() * sizeof(float)) == 0);
  std::vector<std::int64_t> ids_back(3);
  in.read("ids", {reinterpret_cast<std::byte*>(ids_back.data()), 24});
  CHECK(ids_back == ids);

  // The header length is 8 bytes little-endian, the header JSON padded to 8, offsets relative to
  // the data that follows it.
  const char* script = R"(
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', data[:8])
assert n % 8 == 0
header = json.loads(data[8:8 + n])
body = data[8 + n:]
t = header['model.layers.0.mlp.gate.weight']
b, e = t['data_offsets']
print(t['dtype'], t['shape'], struct.unpack('<6f', body[b:e]), header['__metadata__']['format'])
)";
  auto r = muster::test::run_process({"/usr/bin/python3", "-c", script, file.string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("F32 [2, 3] (1.5, -2.25, 2.99999"));
  CHECK_THAT(r.out, Catch::Contains("7.0, 0.10000000149011612, -0.0) pt"));
}

TEST_CASE("a malformed safetensors file is refused, naming it", "[checkpoint]") {
  muster::test::temp_dir dir;
  const auto file = dir / "bad.safetensors";
  {
    std::ofstream out(file, std::ios::binary);
    const std::uint64_t n = 1000;  // past the end
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  CHECK_THROWS_WITH(safetensors_file(file), Catch::Contains(file.string()) &&
                                                Catch::Contains("header length 1000 is past the end"));
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})";
    const std::uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(8, '\0');
  }
  CHECK_THROWS_WITH(safetensors_file(file), Catch::Contains("tensor w has offsets [0, 8)"));
}

TEST_CASE("tensor names map to Hugging Face's and back, Mixtral's too", "[checkpoint]") {
  CHECK(to_hf_name("layers.3.mlp.experts.7.up_proj.weight") ==
        "model.layers.3.mlp.experts.7.up_proj.weight");
  CHECK(to_hf_name("lm_head.weight") == "lm_head.weight");
  CHECK(to_hf_name("embed_tokens.weight") == "model.embed_tokens.weight");
  CHECK(from_hf_name("model.norm.weight") == "norm.weight");
  CHECK(from_hf_name("lm_head.weight") == "lm_head.weight");
  CHECK(from_hf_name("model.layers.1.block_sparse_moe.gate.weight") == "layers.1.mlp.gate.weight");
  CHECK(from_hf_name("model.layers.1.block_sparse_moe.experts.5.w1.weight") ==
        "layers.1.mlp.experts.5.gate_proj.weight");
  CHECK(from_hf_name("model.layers.1.block_sparse_moe.experts.5.w3.weight") ==
        "layers.1.mlp.experts.5.up_proj.weight");
  CHECK(from_hf_name("model.layers.1.block_sparse_moe.experts.5.w2.weight") ==
        "layers.1.mlp.experts.5.down_proj.weight");
}
