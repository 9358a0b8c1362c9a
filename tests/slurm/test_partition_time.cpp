// The time limit Slurm gives a job that asks for none (slurm/sbatch/partition_time.hpp), from
// `scontrol show partition --oneliner` as Slurm 22.05 prints it.
#include <catch2/catch.hpp>

#include "slurm/sbatch/partition_time.hpp"

using muster::slurm::partition_time_limit;

namespace {

// Two partitions as scontrol prints them (trimmed to the keys around the ones read).
const char* const kPartitions =
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL Default=YES QoS=N/A "
    "DefaultTime=00:30:00 DisableRootJobs=NO MaxNodes=UNLIMITED MaxTime=04:00:00 MinNodes=0 "
    "State=UP TotalCPUs=4 TotalNodes=2\n"
    "PartitionName=long AllowGroups=ALL Default=NO DefaultTime=NONE MaxTime=7-00:00:00 "
    "State=UP\n"
    "PartitionName=free AllowGroups=ALL Default=NO DefaultTime=NONE MaxTime=UNLIMITED State=UP\n";

}  // namespace

TEST_CASE("a partition's DefaultTime is a job's limit, else its MaxTime", "[sbatch]") {
  const auto debug = partition_time_limit(kPartitions, "debug");
  REQUIRE(debug);
  CHECK(debug->partition == "debug");
  CHECK(debug->key == "DefaultTime");
  CHECK(debug->value == "00:30:00");
  const auto long_one = partition_time_limit(kPartitions, "long");
  REQUIRE(long_one);
  CHECK(long_one->key == "MaxTime");
  CHECK(long_one->value == "7-00:00:00");
  CHECK(partition_time_limit(kPartitions, "free")->value == "UNLIMITED");
}

TEST_CASE("no partition named: the default one's", "[sbatch]") {
  const auto d = partition_time_limit(kPartitions, "");
  REQUIRE(d);
  CHECK(d->partition == "debug");
  // no partition marked default, or none of that name: nothing to tell
  CHECK_FALSE(partition_time_limit("PartitionName=a Default=NO MaxTime=1:00:00\n", ""));
  CHECK_FALSE(partition_time_limit(kPartitions, "gpu"));
  CHECK_FALSE(partition_time_limit("", "debug"));
  CHECK_FALSE(partition_time_limit("scontrol: error: Invalid partition name specified\n", "x"));
}
