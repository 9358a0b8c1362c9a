// train.device: cpu is the CPU; auto takes a CUDA device only where LibTorch has CUDA and sees
// one; cuda without one is refused with the key and the fix. The trainer's parameters, buffers
// and optimizer state live on the chosen device.
#include <torch/torch.h>  // before Catch (glog's CHECK)

#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "engine/data/document_source.hpp"
#include "engine/train/device_choice.hpp"
#include "engine/train/trainer.hpp"

using namespace muster;

TEST_CASE("train.device picks the CPU or a CUDA device, and refuses cuda without one",
          "[device_choice]") {
  train_section t;
  t.device = "cpu";
  CHECK(engine::train::training_device(t) == torch::Device(torch::kCPU));
  t.device = "auto";
  const auto chosen = engine::train::training_device(t);
  CHECK(chosen.is_cuda() == torch::cuda::is_available());
  t.device = "cuda";
  if (torch::cuda::is_available()) {
    CHECK(engine::train::training_device(t).is_cuda());
  } else {
    try {
      engine::train::training_device(t);
      FAIL("train.device = cuda was taken without a CUDA device");
    } catch (const muster::error& e) {
      CHECK(e.category() == errc::config);
      CHECK_THAT(e.what(), Catch::StartsWith("train.device = \"cuda\" but "));
      CHECK_THAT(e.what(), Catch::Contains("or set train.device = \"cpu\""));
    }
  }
}

TEST_CASE("the trainer keeps its parameters and optimizer state on train.device",
          "[device_choice]") {
  torch::set_num_threads(1);
  job_config c;
  c.model.num_layers = 1;
  c.model.hidden_size = 16;
  c.model.ffn_hidden_size = 32;
  c.model.num_attention_heads = 2;
  c.model.num_query_groups = 1;
  c.model.vocab_size = 256;
  c.model.num_experts = 2;
  c.model.moe_ffn_hidden_size = 16;
  c.train.seq_length = 32;
  c.train.max_tokens_per_pack = 32;
  c.train.steps = 2;
  c.train.precision = "fp32";
  c.train.device = "cpu";
  engine::train::trainer t(c, engine::data::open_documents("text", {"/usr/share/common-licenses"}));
  t.step();
  for (const auto& p : t.model().parameters()) CHECK(p.device().is_cpu());
}
