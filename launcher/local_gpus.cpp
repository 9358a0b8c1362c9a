// Counting this machine's GPUs: see local_gpus.hpp.
#include "launcher/local_gpus.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <system_error>

namespace muster::launcher {

int count_local_gpus(const std::filesystem::path& dev) {
  std::error_code ec;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dev, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("nvidia") || name.size() == 6) continue;
    std::string digits = name.substr(6);
    if (!std::all_of(digits.begin(), digits.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; }))
      continue;  // nvidiactl, nvidia-uvm, nvidia-caps
    std::error_code status_ec;
    if (entry.is_character_file(status_ec)) ++count;
  }
  return count;
}

}  // namespace muster::launcher
