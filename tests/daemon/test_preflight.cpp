// Preflight (daemon/preflight.hpp) as a pure function of what was probed, one check at a time,
// and the probes that can run here for real: kmsg records, GPU description files, the job of a
// real process, and whether another uid can write a directory.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "daemon/gpu_inventory.hpp"
#include "daemon/kernel_log.hpp"
#include "daemon/nvml.hpp"
#include "daemon/preflight.hpp"
#include "daemon/preflight_probe.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::daemon;

namespace {

// Four idle H100s, in a healthy node, for job 4242.
preflight_facts healthy() {
  preflight_facts f;
  f.job_id = "4242";
  f.gpus.source = "description";
  for (int i = 0; i < 4; ++i) {
    gpu_device d;
    d.index = i;
    d.name = "NVIDIA H100 80GB HBM3";
    d.pci_bus_id = fmt::format("00000000:{:02X}:00.0", 0x18 + i);
    d.compute_major = 9;
    d.memory_total_mib = 81559;
    d.memory_free_mib = 81000;
    d.ecc_uncorrected = 0;
    f.gpus.devices.push_back(d);
  }
  f.allocated = {0, 1, 2, 3};
  f.shm_mib = 64 * 1024;
  f.run_dir = "/runs/r1";
  f.disk_free_mib = 500 * 1024;
  return f;
}

const preflight_check& check(const preflight_result& r, const std::string& id) {
  for (const auto& c : r.checks)
    if (c.id == id) return c;
  FAIL("no check " << id);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("a healthy node passes every preflight check", "[preflight]") {
  const auto r = run_preflight(healthy(), {});
  CHECK(r.passed);
  REQUIRE(r.checks.size() == 7);
  for (const auto& c : r.checks) {
    INFO(c.id << ": " << c.detail);
    CHECK(c.status == "pass");
  }
}

TEST_CASE("preflight fails when a GPU of the allocation is missing, or too few are seen",
          "[preflight]") {
  auto f = healthy();
  f.allocated = {0, 1, 2, 3, 4, 5};
  auto r = run_preflight(f, {});
  CHECK_FALSE(r.passed);
  CHECK(check(r, "gpus_visible").status == "fail");
  CHECK_THAT(check(r, "gpus_visible").detail,
             Catch::StartsWith("GPU 4, 5 of the allocation not visible: the node shows 4 GPU(s)"));
  f.allocated.clear();
  f.num_allocated = 8;
  f.gpus = {"none", "libnvidia-ml.so.1 not loaded", "", 0, {}};
  r = run_preflight(f, {});
  CHECK_THAT(check(r, "gpus_visible").detail,
             Catch::Contains("8 GPUs allocated but the node shows 0 (libnvidia-ml.so.1 not "
                             "loaded)"));
  // a step that names no GPUs is not judged on them
  f.num_allocated = -1;
  CHECK(check(run_preflight(f, {}), "gpus_visible").status == "skip");
}

TEST_CASE("preflight fails on a GPU with too little free memory, naming it", "[preflight]") {
  auto f = healthy();
  f.gpus.devices[2].memory_free_mib = 40000;
  const auto r = run_preflight(f, {});
  CHECK_FALSE(r.passed);
  CHECK_THAT(check(r, "gpu_free_memory").detail,
             Catch::StartsWith("GPU 2 has 40000 of 81559 MiB free (at least 90% must be free)"));
  preflight_thresholds lenient;
  lenient.min_free_fraction = 0.4;
  CHECK(run_preflight(f, lenient).passed);
}

TEST_CASE("preflight names leftover processes of other jobs on the step's GPUs, not its own",
          "[preflight]") {
  auto f = healthy();
  f.gpus.devices[1].processes = {{1001, 30000}, {1002, 2000}, {1003, 500}};
  f.job_of_pid = {{1001, "4100"}, {1002, "4242"}, {1003, ""}};  // 1004 gone
  f.gpus.devices[3].processes = {{1004, 100}};
  const auto r = run_preflight(f, {});
  CHECK_FALSE(r.passed);
  const auto& detail = check(r, "gpu_leftovers").detail;
  CHECK_THAT(detail, Catch::Contains("GPU 1: pid 1001 (of job 4100) holds 30000 MiB"));
  CHECK_THAT(detail, Catch::Contains("GPU 1: pid 1003 (of no job) holds 500 MiB"));
  CHECK_THAT(detail, Catch::Contains("GPU 3: pid 1004 (gone or in another namespace)"));
  CHECK_THAT(detail, !Catch::Contains("1002"));  // the step's own job
  CHECK_THAT(detail, Catch::Contains("OOM at step 0"));
  // a GPU the step was not given is not its concern
  f.allocated = {0, 2};
  CHECK(check(run_preflight(f, {}), "gpu_leftovers").status == "pass");
}

TEST_CASE(
    "a step that names no GPUs is checked on every GPU, but another running job's processes "
    "there are that job's own",
    "[preflight]") {
  auto f = healthy();
  f.allocated.clear();  // num_allocated stays -1: none named
  f.gpus.devices[1].processes = {{1001, 40000}, {1005, 1000}, {1003, 500}};
  f.gpus.devices[1].memory_free_mib = 81559 - 41500;
  f.job_of_pid = {{1001, "55"}, {1005, "55"}, {1003, "56"}};
  f.job_allocated = {{"55", true}, {"56", false}};
  auto r = run_preflight(f, {});
  CHECK_FALSE(r.passed);  // job 56 ended and left pid 1003 behind
  auto detail = check(r, "gpu_leftovers").detail;
  CHECK_THAT(detail, Catch::StartsWith("GPU 1: pid 1003 (of job 56) holds 500 MiB (job 55 on GPU "
                                       "1 running there: the step named no GPUs"));
  CHECK(check(r, "gpu_free_memory").status == "pass");  // 500 MiB of 81559 taken
  f.job_of_pid[1003] = "55";
  r = run_preflight(f, {});
  CHECK(r.passed);
  CHECK_THAT(check(r, "gpu_leftovers").detail,
             Catch::StartsWith("no leftover process (job 55 on GPU 1 running there"));
  // Slurm could not say: counted, as before
  f.job_allocated.clear();
  r = run_preflight(f, {});
  CHECK_FALSE(r.passed);
  CHECK_THAT(check(r, "gpu_free_memory").detail, Catch::StartsWith("GPU 1 has 40059 of 81559"));
  // a step given GPU 1 is judged on it, whoever else runs
  f.job_allocated = {{"55", true}};
  f.allocated = {1};
  CHECK_FALSE(run_preflight(f, {}).passed);
}

TEST_CASE("preflight fails on uncorrected ECC errors above the limit", "[preflight]") {
  auto f = healthy();
  f.gpus.devices[0].ecc_uncorrected = 3;
  auto r = run_preflight(f, {});
  CHECK_THAT(check(r, "gpu_ecc").detail,
             Catch::StartsWith("GPU 0: 3 uncorrected ECC errors (at most 0)"));
  preflight_thresholds lenient;
  lenient.max_ecc_uncorrected = 3;
  CHECK(run_preflight(f, lenient).passed);
  for (auto& d : f.gpus.devices) d.ecc_uncorrected.reset();
  CHECK(check(run_preflight(f, {}), "gpu_ecc").status == "skip");
}

TEST_CASE("preflight fails on a hardware Xid on the step's GPUs, not on program faults",
          "[preflight]") {
  auto f = healthy();
  const auto now = boot_clock_us();
  auto xid = [&](int code, const std::string& pci) {
    return *parse_xid_record(
        fmt::format("3,1,{},-;NVRM: Xid (PCI:{}): {}, pid=77, name=python", now, pci, code));
  };
  f.kernel_log.xids = {xid(13, "0000:18:00"), xid(43, "0000:19:00")};
  auto r = run_preflight(f, {});
  CHECK(check(r, "gpu_xid").status == "pass");
  CHECK_THAT(check(r, "gpu_xid").detail, Catch::Contains("(2 program faults)"));
  f.kernel_log.xids.push_back(xid(79, "0000:1a:00"));  // GPU 2 fell off the bus
  r = run_preflight(f, {});
  CHECK_FALSE(r.passed);
  CHECK_THAT(check(r, "gpu_xid").detail, Catch::Contains("Xid (PCI:0000:1a:00): 79"));
  f.allocated = {0, 1};  // not on this step's GPUs
  CHECK(check(run_preflight(f, {}), "gpu_xid").status == "pass");
  f.kernel_log = {{}, "cannot read /dev/kmsg: Permission denied"};
  CHECK(check(run_preflight(f, {}), "gpu_xid").status == "skip");
}

TEST_CASE("preflight checks /dev/shm and the run directory", "[preflight]") {
  auto f = healthy();
  f.shm_mib = 64;
  auto r = run_preflight(f, {});
  CHECK_THAT(check(r, "shm_size").detail, Catch::Contains("/dev/shm holds 64 MiB, under 512 MiB") &&
                                              Catch::Contains("--shm-size"));
  f.shm_mib.reset();
  f.shm_dir = "/srv/shm";  // health.shm_dir, named
  CHECK(check(run_preflight(f, {}), "shm_size").status == "fail");
  CHECK_THAT(check(run_preflight(f, {}), "shm_size").detail,
             Catch::StartsWith("/srv/shm is missing"));
  f = healthy();
  f.disk_free_mib = 100;
  CHECK_THAT(check(run_preflight(f, {}), "run_dir_writable").detail,
             Catch::Contains("/runs/r1 has 100 MiB free, under 1024 MiB"));
  f.run_dir_made_under = "/runs";  // not made yet: named, and where it would be
  CHECK_THAT(check(run_preflight(f, {}), "run_dir_writable").detail,
             Catch::Contains("/runs/r1 does not exist yet; /runs, where it would be made, has 100 "
                             "MiB free, under 1024 MiB"));
  f.run_dir_problem = "/runs/r1: uid 1000 cannot write /runs";
  CHECK(check(run_preflight(f, {}), "run_dir_writable").detail == f.run_dir_problem);
  f.run_dir.clear();
  CHECK(check(run_preflight(f, {}), "run_dir_writable").status == "skip");
}

TEST_CASE("kmsg records: Xid lines are read with their time and GPU, others ignored",
          "[preflight]") {
  const auto e = parse_xid_record(
      "3,2211,5812345678,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has "
      "fallen off the bus.");
  REQUIRE(e);
  CHECK(e->xid == 79);
  CHECK(e->boot_us == 5812345678);
  CHECK(e->pci == pci_key("00000000:3B:00.0"));
  CHECK_THAT(e->message, Catch::StartsWith("Xid (PCI:0000:3b:00): 79, pid=1234"));
  CHECK_FALSE(parse_xid_record("6,1,100,-;usb 1-1: new high-speed USB device"));
  CHECK_FALSE(parse_xid_record("NVRM: Xid (PCI:0000:3b:00): 79"));  // no kmsg header
  CHECK(xid_is_hardware(79));
  CHECK(xid_is_hardware(48));
  CHECK_FALSE(xid_is_hardware(13));
  CHECK(pci_key("0000:3b:00") == pci_key("00000000:3B:00.0"));
  CHECK(pci_key("0000:3b:00") != pci_key("0000:3c:00"));
  CHECK_FALSE(pci_key("not a bus"));

  muster::test::temp_dir dir;
  const auto now = boot_clock_us();
  muster::test::write_file(
      dir / "kmsg", fmt::format("3,1,{},-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n"
                                " SUBSYSTEM=pci\n"
                                "6,2,{},-;eth0: link up\n"
                                "3,3,{},-;NVRM: Xid (PCI:0000:3c:00): 94, pid=2, contained ECC\n",
                                now - 7'200'000'000, now - 1'000'000, now - 1'000'000));
  const auto read = recent_xids(dir / "kmsg", std::chrono::hours(1));
  CHECK(read.why_not.empty());
  REQUIRE(read.xids.size() == 1);  // the 48 is two hours old
  CHECK(read.xids[0].xid == 94);
  CHECK_THAT(recent_xids(dir / "missing", std::chrono::hours(1)).why_not,
             Catch::Contains("cannot read") && Catch::Contains("missing"));
}

TEST_CASE("a GPU description file is read strictly, and without NVML there are no GPUs",
          "[preflight]") {
  muster::test::temp_dir dir;
  muster::test::write_file(dir / "gpus.json", R"({"driver_version": "570.86.15",
      "cuda_driver_version": 12080, "devices": [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute": "9.0",
         "memory_total_mib": 81559, "memory_free_mib": 1000, "nvlinks_active": 18, "nvswitch": true,
         "processes": [{"pid": 7, "used_mib": 80000}]},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}]})");
  const auto inv = read_gpu_description(dir / "gpus.json");
  CHECK(inv.source == "description");
  CHECK(inv.cuda_driver_version == 12080);
  REQUIRE(inv.devices.size() == 2);
  CHECK(inv.devices[0].compute_major == 9);
  CHECK(inv.devices[0].nvswitch);
  CHECK_FALSE(inv.devices[1].nvswitch);
  CHECK(inv.devices[0].processes.at(0).used_mib == 80000);
  CHECK(inv.devices[1].memory_free_mib == 81559);  // free defaults to total
  CHECK_FALSE(inv.devices[1].ecc_uncorrected);
  // what status prints reads back the same
  muster::test::write_file(dir / "again.json", to_json(inv).dump());
  CHECK(to_json(read_gpu_description(dir / "again.json")) == to_json(inv));

  muster::test::write_file(dir / "bad.json", R"({"devices": [{"index": "zero", "name": "x"}]})");
  CHECK_THROWS_WITH(read_gpu_description(dir / "bad.json"),
                    Catch::Contains("bad.json: devices[0].index"));
  CHECK_THROWS_WITH(read_gpu_description(dir / "none.json"),
                    Catch::Contains("node.gpu_description: cannot read"));

  const auto none = probe_nvml("libmuster-no-such-nvml.so.1");
  CHECK(none.source == "none");
  CHECK(none.devices.empty());
  CHECK_THAT(none.why_none, Catch::Contains("not loaded"));

  // a description broken after musterd started: a preflight's verdict on it, not an error
  preflight_ask ask;
  ask.job_id = "4242";
  ask.gpus = {0};
  const auto facts = probe_preflight(ask, {(dir / "bad.json").string(), "/dev/null", "/tmp"}, {},
                                     {"", "", std::chrono::milliseconds(100)});
  const auto r = run_preflight(facts, {});
  CHECK_FALSE(r.passed);
  CHECK_THAT(check(r, "gpus_visible").detail,
             Catch::Contains("GPU 0 of the allocation not visible: the node shows 0 GPU(s) (") &&
                 Catch::Contains("bad.json: devices[0].index"));
}

TEST_CASE("a process's job comes from its Slurm cgroup or its environment", "[preflight]") {
  muster::test::env_change env;
  env.set["SLURM_JOB_ID"] = "4100";
  auto slurm = muster::test::spawn_process({"sleep", "30"}, env);
  env.set.clear();
  env.unset = {"SLURM_JOB_ID"};
  env.set["MUSTER_RUN_ID"] = "muster-job-1";
  auto local = muster::test::spawn_process({"sleep", "30"}, env);
  env.unset.push_back("MUSTER_RUN_ID");
  env.set.clear();
  auto plain = muster::test::spawn_process({"sleep", "30"}, env);
  CHECK(job_of_process(slurm.pid) == "4100");
  CHECK(job_of_process(local.pid) == "muster-job-1");
  CHECK(job_of_process(plain.pid) == "");
  for (auto* p : {&slurm, &local, &plain}) {
    ::kill(p->pid, SIGKILL);
    muster::test::wait_process(p->pid);
    ::close(p->out_fd);
  }
  CHECK_FALSE(job_of_process(slurm.pid).has_value());  // gone
  // a cgroup path names the job even without the environment
  muster::test::temp_dir proc;
  std::filesystem::create_directories(proc / "77");
  muster::test::write_file(proc / "77/cgroup",
                           "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n");
  muster::test::write_file(proc / "77/environ", "");
  CHECK(job_of_process(77, proc.path().string()) == "4242");
}

TEST_CASE("whether another uid can write a run directory, or where it would be made",
          "[preflight]") {
  muster::test::temp_dir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  const auto as_root = check_run_dir((dir / "runs/r1").string(), 0);
  CHECK(as_root.problem.empty());
  CHECK(as_root.free_mib.value_or(-1) > 0);
  CHECK(as_root.made_under == dir.path().string());
  CHECK(check_run_dir(dir.path().string(), 0).made_under.empty());  // it exists
  // under /proc nothing can be made: the directory is named as missing, not as 0 MiB free
  if (std::filesystem::exists("/proc/self"))
    CHECK(check_run_dir("/proc/muster-nope", 0).problem ==
          "/proc/muster-nope does not exist, and cannot be made in /proc: a file system that "
          "stores nothing (such as /proc or /sys); choose another launch.runs_dir");
  if (::geteuid() != 0) {
    WARN("SKIPPED (the rest): needs root, to check as another uid");
    return;
  }
  // checked as nobody: the 0700 directory is as far as it sees
  const auto hidden = check_run_dir((dir / "runs/r1").string(), 65534);
  CHECK_THAT(hidden.problem, Catch::Contains("uid 65534 cannot write " + dir.path().string() +
                                             ": Permission denied"));
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  CHECK(check_run_dir((dir / "runs/r1").string(), 65534).problem.empty());
  muster::test::write_file(dir / "file", "");
  CHECK_THAT(check_run_dir((dir / "file/r1").string(), 65534).problem,
             Catch::Contains((dir / "file").string() + " is not a directory"));
  CHECK_THAT(check_run_dir("/tmp", 4'000'000'000u).problem, Catch::Contains("no such user"));
}
