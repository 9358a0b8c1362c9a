// The time limit Slurm gives a job that asks for none: its partition's DefaultTime, else the
// partition's MaxTime. muster-sbatch checks slurm.checkpoint_lead against it at submit, as it
// does a slurm.time or an sbatch --time.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace muster::slurm {

struct partition_limit {
  std::string partition;  // as scontrol names it
  std::string key;        // DefaultTime or MaxTime
  std::string value;      // Slurm's text of it ("00:30:00", "1-00:00:00", "UNLIMITED")
};

// From `scontrol show partition --oneliner`'s text (one partition a line, key=value words): the
// limit of partition `name`, or of the one with Default=YES when `name` is empty. std::nullopt
// when that partition is not there.
std::optional<partition_limit> partition_time_limit(std::string_view scontrol_text,
                                                    std::string_view name);

// Asks scontrol (with an argv, 5 s at most) for partition `name`'s limit ("" = the default
// partition; of a list "a,b", the first). std::nullopt when it cannot tell: no Slurm here, no
// controller answering, no such partition.
std::optional<partition_limit> ask_partition_time_limit(const std::string& name);

}  // namespace muster::slurm
