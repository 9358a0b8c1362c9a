// The thread's autocast state by device type, over both LibTorch APIs: 1.13 (Debian, CI) has
// is_cpu_enabled()/is_enabled() and a dtype getter per device kind; 2.4 and later key them by
// at::DeviceType and deprecate the old ones (a warning, an error under -Werror). The engine asks
// only through these.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define MUSTER_AUTOCAST_BY_DEVICE 1
#else
#define MUSTER_AUTOCAST_BY_DEVICE 0
#endif

namespace muster::engine::ops {

inline bool autocast_on(at::DeviceType device) {
#if MUSTER_AUTOCAST_BY_DEVICE
  return at::autocast::is_autocast_enabled(device);
#else
  return device == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline at::ScalarType autocast_dtype(at::DeviceType device) {
#if MUSTER_AUTOCAST_BY_DEVICE
  return at::autocast::get_autocast_dtype(device);
#else
  return device == at::kCUDA ? at::autocast::get_autocast_gpu_dtype()
                             : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast(at::DeviceType device, bool on, at::ScalarType dtype) {
#if MUSTER_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_enabled(device, on);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == at::kCUDA) {
    at::autocast::set_enabled(on);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(on);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace muster::engine::ops
