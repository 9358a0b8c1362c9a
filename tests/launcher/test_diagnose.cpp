// muster diagnose's classifier and diagnosis (launcher/diagnose/) on log lines as the upstream
// projects print them: PyTorch's CUDA OOM (each generation), ProcessGroupNCCL's watchdog, NCCL,
// c10d, Slurm's slurmstepd and srun, the driver's Xid lines; cascades whose root is not the
// first error line, and decoys that look alarming and are not.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>

#include "launcher/diagnose/diagnosis.hpp"
#include "launcher/diagnose/log_reader.hpp"
#include "launcher/diagnose/log_signal.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::launcher::diagnose;

namespace {

diagnosis diagnose_lines(const std::vector<std::pair<std::string, std::string>>& lines,
                         int world_size = 0) {
  diagnoser d(world_size);
  std::int64_t n = 0;
  for (const auto& [file, line] : lines) d.add_line(file, ++n, line);
  return d.finish();
}

}  // namespace

TEST_CASE("a CUDA OOM is read in the message of PyTorch 1.x and 2.0", "[diagnose]") {
  const auto s = match_log_line(
      "[rank3]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB "
      "(GPU 3; 79.15 GiB total capacity; 76.50 GiB already allocated; 123.00 MiB free; 77.90 GiB "
      "reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
      "max_split_size_mb to avoid fragmentation.");
  REQUIRE(s);
  CHECK(s->category == "cuda_oom");
  CHECK(s->rank == 3);
  CHECK(s->facts.at("tried_to_allocate") == "256.00 MiB");
  CHECK(s->facts.at("gpu") == "3");
  CHECK(s->facts.at("capacity") == "79.15 GiB");
  CHECK(s->facts.at("allocated") == "76.50 GiB");
  CHECK(s->facts.at("free") == "123.00 MiB");
  CHECK(s->facts.at("reserved") == "77.90 GiB");
}

TEST_CASE("a CUDA OOM is read in the message of PyTorch 2.1 and later, with other processes",
          "[diagnose]") {
  const auto s = match_log_line(
      "[default1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
      "has a total capacity of 79.15 GiB of which 1.23 GiB is free. Process 4242 has 40.10 GiB "
      "memory in use. Including non-PyTorch memory, this process has 37.80 GiB memory in use. Of "
      "the allocated memory 35.01 GiB is allocated by PyTorch, and 1.27 GiB is reserved by "
      "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.");
  REQUIRE(s);
  CHECK(s->rank == 1);
  CHECK(s->facts.at("tried_to_allocate") == "2.00 GiB");
  CHECK(s->facts.at("gpu") == "1");
  CHECK(s->facts.at("capacity") == "79.15 GiB");
  CHECK(s->facts.at("free") == "1.23 GiB");
  CHECK(s->facts.at("this_process") == "37.80 GiB");
  CHECK(s->facts.at("allocated") == "35.01 GiB");
  CHECK(s->facts.at("reserved_unallocated") == "1.27 GiB");
  CHECK(s->facts.at("other_processes") == "Process 4242 has 40.10 GiB");
  const auto d = diagnose_lines(
      {{"slurm-77.out", "[default1]:" + std::string("x")},
       {"slurm-77.out",
        "[default1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
        "has a total capacity of 79.15 GiB of which 1.23 GiB is free. Process 4242 has 40.10 GiB "
        "memory in use. Of the allocated memory 35.01 GiB is allocated by PyTorch, and 1.27 GiB is "
        "reserved by PyTorch but unallocated."}});
  REQUIRE(d.findings.size() == 1);
  const auto& f = d.findings[0];
  CHECK(f.root);
  CHECK_THAT(f.summary, Catch::Contains("CUDA out of memory on rank 1 (GPU 1): tried to allocate "
                                        "2.00 GiB of 79.15 GiB, 1.23 GiB free"));
  // another process on the GPU comes first: shrinking the model is not the fix
  CHECK_THAT(f.fixes.at(0), Catch::StartsWith("other processes hold memory on that GPU (Process "
                                              "4242 has 40.10 GiB)"));
  CHECK_THAT(f.fixes.at(1),
             Catch::Contains("train.max_tokens_per_pack") && Catch::Contains("--micro-batch-size"));
  CHECK_THAT(f.fixes.back(), Catch::Contains("expandable_segments:True"));
  CHECK(f.evidence.at(0).file == "slurm-77.out");
  CHECK(f.evidence.at(0).line == 2);
}

TEST_CASE("an NCCL watchdog timeout names the op, seq and limit, and the ranks that did not report",
          "[diagnose]") {
  const std::string line =
      "[rank{}]:[E1122 03:12:44.123 ProcessGroupNCCL.cpp:616] [Rank {}] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=1042, OpType=ALLREDUCE, NumelIn=1048576, "
      "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.";
  std::vector<std::pair<std::string, std::string>> lines;
  for (int r : {0, 1, 2, 4, 5, 6, 7})
    lines.emplace_back("job.log", fmt::format(fmt::runtime(line), r, r));
  const auto d = diagnose_lines(lines, 8);
  REQUIRE(d.findings.size() == 1);
  const auto& f = d.findings[0];
  CHECK(f.category == "nccl_timeout");
  CHECK(f.root);
  CHECK(f.count == 7);
  CHECK(f.evidence.size() == kMaxEvidence);
  CHECK(f.facts.at("seq") == "1042");
  CHECK(f.facts.at("op") == "ALLREDUCE");
  CHECK(f.facts.at("timeout_ms") == "600000");
  CHECK_THAT(f.summary, Catch::Contains("collective ALLREDUCE seq 1042 timed out after 600000 ms "
                                        "on rank 0, 1, 2, 4, 5, 6, 7; rank 3 did not report"));
}

TEST_CASE("timeouts beside a failure are its knock-on effect, even when their lines come first",
          "[diagnose]") {
  const auto d = diagnose_lines({
      {"rank-0.log",
       "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
       "OpType=ALLGATHER, NumelIn=1, NumelOut=8, Timeout(ms)=60000) ran for 60001 milliseconds "
       "before timing out."},
      {"rank-5.log",
       "5: RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 5; "
       "79.15 GiB total capacity; 78.00 GiB already allocated; 100.00 MiB free; "
       "78.50 GiB reserved in total by PyTorch)"},
  });
  REQUIRE(d.findings.size() == 2);
  CHECK(d.findings[0].category == "cuda_oom");
  CHECK(d.findings[0].root);
  CHECK(d.findings[0].ranks == std::set<int>{5});
  CHECK(d.findings[1].category == "nccl_timeout_cascade");
  CHECK_FALSE(d.findings[1].root);
  CHECK_THAT(d.findings[1].summary, Catch::StartsWith("knock-on: "));
}

TEST_CASE("Slurm's time limit, its OOM kills and the driver's Xid lines are findings",
          "[diagnose]") {
  auto one = [](const std::string& line) {
    auto s = match_log_line(line);
    REQUIRE(s);
    return *s;
  };
  auto limit =
      one("slurmstepd: error: *** JOB 4242 ON gpu-a07 CANCELLED AT "
          "2026-11-22T03:00:01 DUE TO TIME LIMIT ***");
  CHECK(limit.category == "slurm_time_limit");
  CHECK(limit.facts.at("job") == "4242");
  CHECK(limit.facts.at("host") == "gpu-a07");
  CHECK(one("slurmstepd: error: *** STEP 4242.0 ON gpu-a07 CANCELLED AT 2026-11-22T03:00:01 DUE "
            "TO TIME LIMIT ***")
            .facts.at("step") == "4242.0");
  CHECK(one("slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step "
            "tasks have been OOM Killed.")
            .category == "host_oom_kill");
  const auto task = one("srun: error: gpu-a07: task 3: Out Of Memory");
  CHECK(task.category == "host_oom_kill");
  CHECK(task.rank == 3);
  CHECK(one("[12345.678] Out of memory: Killed process 4242 (python) total-vm:1234kB").category ==
        "host_oom_kill");
  const auto xid =
      one("[ 5812.345678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
          "GPU has fallen off the bus.");
  CHECK(xid.category == "gpu_hardware_fault");
  CHECK(xid.facts.at("xid") == "79");
  CHECK(xid.facts.at("pci") == "0000:3b:00");
  CHECK(one("gpu-a07:1234:1300 [0] NCCL WARN Error while creating shared memory segment "
            "/dev/shm/nccl-abc (size 9637888)")
            .facts.at("sub_cause") == "shared memory");
  CHECK(one("RuntimeError: The server socket has failed to listen on any local network address. "
            "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
            "use).")
            .category == "rendezvous_port_in_use");
}

TEST_CASE("decoys: a bare Killed, NCCL's info lines and a zero error count are no failure",
          "[diagnose]") {
  const auto d = diagnose_lines({
      {"slurm.out", "Killed"},
      {"slurm.out", "gpu-a07:1234:1300 [0] NCCL INFO NET/IB : No device found."},
      {"slurm.out", "training: 0 errors, 0 NaNs, out of memory budget 80%"},
      {"slurm.out", "[rank0]: Traceback (most recent call last):"},
      {"slurm.out", "[rank0]: ValueError: bad shape"},
  });
  CHECK_FALSE(d.failed());
  // unknown: the lines that look most like an error
  REQUIRE(d.suspicious.size() == 2);
  CHECK(d.suspicious[1].text == "[rank0]: ValueError: bad shape");
}

TEST_CASE("the log reader streams lines across its buffer, and cuts overlong ones", "[diagnose]") {
  muster::test::temp_dir dir;
  {
    std::ofstream out(dir / "big.log");
    for (int i = 0; i < 60000; ++i) out << "step " << i << " loss 2.345 lr 1e-4 tokens/s 51234\n";
    out << std::string(200000, 'x') << "\n";  // one line of 200 KB
    out << "last line without a newline";
  }
  std::int64_t count = 0, longest = 0;
  std::string last;
  const auto total = read_log_lines(dir / "big.log", [&](std::int64_t n, std::string_view line) {
    CHECK(n == count + 1);  // every line, in order
    count = n;
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(line.size()));
    last = std::string(line);
  });
  CHECK(count == 60002);
  CHECK(total == 60002);
  CHECK(longest == static_cast<std::int64_t>(kMaxLineBytes));
  CHECK(last == "last line without a newline");
  // with keywords, only the lines holding one, numbered as in the file
  std::vector<std::int64_t> numbers;
  const std::string_view words[] = {"step 777 ", "step 59999 ", "without a"};
  CHECK(read_log_lines(
            dir / "big.log", [&](std::int64_t n, std::string_view) { numbers.push_back(n); },
            words) == 60002);
  CHECK(numbers == std::vector<std::int64_t>{778, 60000, 60002});
  // a line longer than the reader's buffer: its start is the line, the rest is skipped
  muster::test::write_file(dir / "huge.log", std::string(3 << 20, 'y') + "\nafter\n");
  std::vector<std::string> huge;
  CHECK(read_log_lines(dir / "huge.log",
                       [&](std::int64_t, std::string_view line) { huge.emplace_back(line); }) == 2);
  REQUIRE(huge.size() == 2);
  CHECK(huge[0].size() == kMaxLineBytes);
  CHECK(huge[1] == "after");
  CHECK_THROWS_WITH(read_log_lines(dir / "missing.log", [](std::int64_t, std::string_view) {}),
                    Catch::Contains("--log") && Catch::Contains("missing.log"));
}
