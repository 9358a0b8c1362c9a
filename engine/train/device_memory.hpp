// What a rank's memory is, for its step records (common/run_store_records.hpp: mem_bytes,
// peak_mem_bytes, mem_device): on a CUDA device the caching allocator's reserved bytes (what
// the GPU has given PyTorch, the figure that meets the GPU's capacity in an out-of-memory
// error; the CUDA context and NCCL's own buffers are not in it), the step's peak and the run's;
// on the CPU the process's resident memory now and its high-water mark.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace muster::engine::train {

struct memory_reading {
  std::int64_t step_bytes = 0;  // cuda: the peak since the last reading; cpu: resident now
  std::int64_t peak_bytes = 0;  // the peak since the process started
  std::string device;           // "cuda" or "cpu"
};

class memory_meter {
 public:
  explicit memory_meter(torch::Device device) : device_(device) {}

  // The memory now. On a CUDA device this starts the next step's peak (it resets the
  // allocator's peak statistics).
  memory_reading read();

 private:
  torch::Device device_;
  std::int64_t peak_ = 0;  // cuda: the largest step peak read so far
};

}  // namespace muster::engine::train
