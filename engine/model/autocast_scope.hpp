// Mixed precision by autocast (train.precision = bf16): inside an autocast_scope, matmuls and
// linears run in bf16 while norms, softmax, the router and the loss stay fp32; the parameters
// themselves stay fp32 (the main weights the optimizer updates; engine/parallel/flat_unit).
// The scope is what PyTorch's `with torch.autocast(...)` is, in C++: it sets the thread's
// autocast state and puts the previous one back. The cast cache is off: under FSDP a layer's
// weights are freed after its forward, and each weight is used once per forward anyway.
#pragma once

#include <ATen/autocast_mode.h>

namespace muster::engine::model {

struct autocast_state {
  bool cpu = false, cuda = false;
  at::ScalarType cpu_dtype = at::kBFloat16, cuda_dtype = at::kBFloat16;

  static autocast_state current() {
    return {at::autocast::is_cpu_enabled(), at::autocast::is_enabled(),
            at::autocast::get_autocast_cpu_dtype(), at::autocast::get_autocast_gpu_dtype()};
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
    at::autocast::set_cpu_enabled(s.cpu);
    at::autocast::set_enabled(s.cuda);
    at::autocast::set_autocast_cpu_dtype(s.cpu_dtype);
    at::autocast::set_autocast_gpu_dtype(s.cuda_dtype);
  }
  autocast_state previous_;
  bool cache_;
};

}  // namespace muster::engine::model
