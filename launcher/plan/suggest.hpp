// Nearest valid values for the planner's error messages: "try ep = 2, 4 or 8".
// Not here: which values are valid (each check passes its own predicate).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace muster::launcher::plan {

// Up to `count` values in [lo, hi] for which `ok` holds, nearest to `around` first, returned in
// ascending order (none where hi < lo). Searches outward from `around`.
std::vector<int> nearest_valid(int around, int lo, int hi, const std::function<bool(int)>& ok,
                               int count = 4);

// The divisors of n nearest to `around` (up to `count`), ascending.
std::vector<int> nearest_divisors(int n, int around, int count = 4);

// "4", "2 or 4", "1, 2, 4 or 8"; "" for none.
std::string or_list(const std::vector<int>& values);

}  // namespace muster::launcher::plan
