// A partition's time limit for a job that asks for none: see partition_time.hpp.
#include "slurm/sbatch/partition_time.hpp"

#include <chrono>
#include <map>
#include <sstream>

#include "common/run_program.hpp"

namespace muster::slurm {

std::optional<partition_limit> partition_time_limit(std::string_view scontrol_text,
                                                    std::string_view name) {
  std::istringstream lines{std::string(scontrol_text)};
  for (std::string line; std::getline(lines, line);) {
    std::map<std::string, std::string, std::less<>> keys;
    std::istringstream words(line);
    for (std::string word; words >> word;)
      if (const auto eq = word.find('='); eq != std::string::npos)
        keys[word.substr(0, eq)] = word.substr(eq + 1);
    const auto partition = keys.find("PartitionName");
    if (partition == keys.end()) continue;
    if (name.empty() ? keys["Default"] != "YES" : partition->second != name) continue;
    // Slurm's rule: DefaultTime when the partition has one, else its MaxTime
    const auto default_time = keys.find("DefaultTime");
    if (default_time != keys.end() && default_time->second != "NONE")
      return partition_limit{partition->second, "DefaultTime", default_time->second};
    const auto max_time = keys.find("MaxTime");
    if (max_time == keys.end()) return std::nullopt;
    return partition_limit{partition->second, "MaxTime", max_time->second};
  }
  return std::nullopt;
}

std::optional<partition_limit> ask_partition_time_limit(const std::string& name) {
  const auto first = name.substr(0, name.find(','));
  std::vector<std::string> argv = {"scontrol", "show", "partition", "--oneliner"};
  if (!first.empty()) argv.push_back(first);
  const auto run = run_program(argv, std::chrono::seconds(5));
  if (!run.ok()) return std::nullopt;
  return partition_time_limit(run.output, first);
}

}  // namespace muster::slurm
