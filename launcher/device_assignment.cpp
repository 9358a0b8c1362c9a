// GPUs and CPUs per local rank: see device_assignment.hpp.
#include "launcher/device_assignment.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.hpp"

namespace muster::launcher {

std::vector<std::optional<std::string>> assign_gpus(
    int nproc, const std::optional<std::vector<std::string>>& visible, int num_gpus) {
  std::vector<std::optional<std::string>> out(static_cast<std::size_t>(nproc));
  if (visible) {
    if (visible->empty()) return out;  // "", "-1", NoDevFiles: no GPU, leave it as it is
    MUSTER_CHECK(nproc <= static_cast<int>(visible->size()), errc::invalid_input,
                 "launch.nproc = {} but CUDA_VISIBLE_DEVICES={} shows {} GPU(s); use "
                 "launch.nproc = {} or fewer (0 = one per GPU)",
                 nproc, fmt::join(*visible, ","), visible->size(), visible->size());
    for (int r = 0; r < nproc; ++r) out[static_cast<std::size_t>(r)] = (*visible)[static_cast<std::size_t>(r)];
    return out;
  }
  if (num_gpus == 0) return out;
  MUSTER_CHECK(nproc <= num_gpus, errc::invalid_input,
               "launch.nproc = {} but this machine has {} GPU(s) (/dev/nvidia*); use "
               "launch.nproc = {} or fewer (0 = one per GPU)",
               nproc, num_gpus, num_gpus);
  for (int r = 0; r < nproc; ++r) out[static_cast<std::size_t>(r)] = std::to_string(r);
  return out;
}

std::vector<std::vector<int>> split_cpus(const std::vector<int>& allowed, int nproc) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(nproc));
  const int n = static_cast<int>(allowed.size());
  if (n < nproc) {
    for (auto& share : out) share = allowed;
    return out;
  }
  std::size_t next = 0;
  for (int r = 0; r < nproc; ++r) {
    int size = n / nproc + (r < n % nproc ? 1 : 0);
    for (int i = 0; i < size; ++i) out[static_cast<std::size_t>(r)].push_back(allowed[next++]);
  }
  return out;
}

}  // namespace muster::launcher
