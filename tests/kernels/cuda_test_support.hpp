// Helpers of the CUDA kernel tests: whether a device is there, device buffers, and the
// normalised comparison that prints the first mismatches.
#pragma once

#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace muster::test {

inline bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A device copy of a host vector, freed with it.
template <class T>
struct device_buffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count) : n(count) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<std::size_t>(1, n) * sizeof(T)) ==
            cudaSuccess);
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) {
    REQUIRE(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~device_buffer() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    REQUIRE(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
};

// max |a - b| / (max |b| + tiny), with the first few mismatches over `bound` described.
template <class T>
double compare(const std::vector<T>& got, const std::vector<T>& want, double bound,
               std::string& report) {
  double scale = 1e-30, worst = 0;
  for (const auto& w : want) scale = std::max(scale, std::abs(double(w)));
  std::ostringstream out;
  int shown = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(double(got[i]) - double(want[i])) / scale;
    worst = std::max(worst, err);
    if (err > bound && shown++ < 5)
      out << "  [" << i << "] cuda " << got[i] << " cpu " << want[i] << "\n";
  }
  report = out.str();
  return worst;
}

}  // namespace muster::test
