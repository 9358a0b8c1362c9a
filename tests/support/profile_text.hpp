// Reading a profile summary (engine/train/step_profiler): the calls of a name's row.
#pragma once

#include <sstream>
#include <string>

namespace muster::test {

// The calls column of the first row naming exactly `name`; -1 when there is none.
inline long profiled_calls(const std::string& summary, const std::string& name) {
  std::istringstream lines(summary);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.rfind("  " + name);
    if (at == std::string::npos || at + 2 + name.size() != line.size()) continue;
    std::istringstream row(line);
    long calls = -1;
    row >> calls;
    return calls;
  }
  return -1;
}

}  // namespace muster::test
