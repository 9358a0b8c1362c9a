// Mixed precision by autocast (train.precision = bf16): inside an autocast_scope, matmuls and
// linears run in bf16 while norms, softmax, the router and the loss stay fp32; the parameters
// themselves stay fp32 (the main weights the optimizer updates; engine/parallel/flat_unit).
// The scope is what PyTorch's `with torch.autocast(...)` is, in C++: it sets the thread's
// autocast state and puts the previous one back. The cast cache is off: under FSDP a layer's
// weights are freed after its forward, and each weight is used once per forward anyway.
#pragma once

#include <ATen/autocast_mode.h>

#include "engine/ops/autocast_query.hpp"

namespace muster::engine::model {

struct autocast_state {
  bool cpu = false, cuda = false;
  at::ScalarType cpu_dtype = at::kBFloat16, cuda_dtype = at::kBFloat16;

  static autocast_state current() {
    return {ops::autocast_on(at::kCPU), ops::autocast_on(at::kCUDA), ops::autocast_dtype(at::kCPU),
            ops::autocast_dtype(at::kCUDA)};
  }
  // bf16 on both device types when `on`, else off.
  static autocast_state bf16(bool on) { return {on, on, at::kBFloat16, at::kBFloat16}; }
};

class autocast_scope {
 public:
  explicit autocast_scope(const autocast_state& s)
      : previous_(autocast_state::current()), cache_(at::autocast::is_autocast_cache_enabled()) {
    set(s);
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~autocast_scope() {
    set(previous_);
    at::autocast::set_autocast_cache_enabled(cache_);
  }
  autocast_scope(const autocast_scope&) = delete;
  autocast_scope& operator=(const autocast_scope&) = delete;

 private:
  static void set(const autocast_state& s) {
    ops::set_autocast(at::kCPU, s.cpu, s.cpu_dtype);
    ops::set_autocast(at::kCUDA, s.cuda, s.cuda_dtype);
  }
  autocast_state previous_;
  bool cache_;
};

}  // namespace muster::engine::model
