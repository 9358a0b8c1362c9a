// Nearest valid values: see suggest.hpp.
#include "launcher/plan/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace muster::launcher::plan {

std::vector<int> nearest_valid(int around, int lo, int hi, const std::function<bool(int)>& ok,
                               int count) {
  std::vector<int> found;
  if (hi < lo) return found;
  around = std::clamp(around, lo, hi);
  for (long long step = 0; static_cast<int>(found.size()) < count; ++step) {
    long long below = around - step;
    long long above = around + step;
    if (below < lo && above > hi) break;
    if (below >= lo && ok(static_cast<int>(below))) found.push_back(static_cast<int>(below));
    if (step != 0 && above <= hi && static_cast<int>(found.size()) < count &&
        ok(static_cast<int>(above)))
      found.push_back(static_cast<int>(above));
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<int> nearest_divisors(int n, int around, int count) {
  std::vector<int> divisors;
  for (int d = 1; static_cast<long long>(d) * d <= n; ++d)
    if (n % d == 0) {
      divisors.push_back(d);
      if (d != n / d) divisors.push_back(n / d);
    }
  std::sort(divisors.begin(), divisors.end(), [&](int a, int b) {
    return std::abs(a - around) != std::abs(b - around) ? std::abs(a - around) < std::abs(b - around)
                                                        : a < b;
  });
  if (static_cast<int>(divisors.size()) > count) divisors.resize(static_cast<std::size_t>(count));
  std::sort(divisors.begin(), divisors.end());
  return divisors;
}

std::string or_list(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += (i + 1 == values.size()) ? " or " : ", ";
    out += fmt::format("{}", values[i]);
  }
  return out;
}

}  // namespace muster::launcher::plan
