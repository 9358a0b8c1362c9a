// muster diagnose's categories beyond the OOM and the timeout, on lines as the upstream projects
// print them: NCCL's own allocations, the heartbeat monitor, c10d's TCPStore and torchelastic's
// rendezvous, Ray compiled graphs, torchelastic's agent and ChildFailedError (with its
// error.json), srun's task lines, Megatron's CUDA_DEVICE_MAX_CONNECTIONS assertion, NCCL user
// buffers beside expandable segments, and checkpoints that do not fit; which is the root when
// several are in one log; and decoys.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "launcher/diagnose/diagnosis.hpp"
#include "launcher/diagnose/log_signal.hpp"
#include "launcher/launcher_lines.hpp"
#include "launcher/rendezvous/kv_store.hpp"
#include "launcher/rendezvous/node_group.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::launcher::diagnose;
using muster::launcher::is_node_start_line;
using muster::launcher::node_start_line;

namespace {

log_signal one(const std::string& line) {
  auto s = match_log_line(line);
  INFO(line);
  REQUIRE(s);
  return *s;
}

diagnosis diagnose_lines(const std::vector<std::string>& lines, int world_size = 0,
                         const std::string& file = "job.log") {
  diagnoser d(world_size);
  std::int64_t n = 0;
  for (const auto& line : lines) d.add_line(file, ++n, line);
  return d.finish();
}

const finding& root_of(const diagnosis& d) {
  REQUIRE(d.failed());
  REQUIRE(d.findings.front().root);
  return d.findings.front();
}

}  // namespace

TEST_CASE("NCCL's own allocations failing are nccl_oom, not a PyTorch OOM", "[diagnose]") {
  auto s =
      one("gpu-a07:2211:2290 [3] include/alloc.h:103 NCCL WARN Failed to CUDA calloc "
          "2097152 bytes");
  CHECK(s.category == "nccl_oom");
  CHECK(s.facts.at("bytes") == "2097152");
  CHECK(one("gpu-a07:2211:2290 [3] enqueue.cc:1402 NCCL WARN Cuda failure 'out of memory'")
            .category == "nccl_oom");
  CHECK(one("[rank3]: Cuda failure 2 'out of memory'").rank == 3);
  s =
      one("gpu-a07:2211:2290 [3] transport/nvls.cc:94 NCCL WARN Call to cuMemCreate failed "
          "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK(s.category == "nccl_oom");
  CHECK(s.facts.at("call") == "cuMem (NVLS or user buffers)");
  CHECK(one("RuntimeError: CUDA error: out of memory").category == "cuda_oom");
  const auto d = diagnose_lines(
      {"[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
       "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
       "[rank3]: Cuda failure 'out of memory'"});
  CHECK(root_of(d).category == "nccl_oom");
  CHECK_THAT(root_of(d).fixes[1], Catch::Contains("NCCL_NVLS_ENABLE=0"));
}

TEST_CASE("the heartbeat monitor and a stuck watchdog are hang_watchdog_stuck", "[diagnose]") {
  auto s =
      one("[rank2]:[E1122 03:20:44.1 ProcessGroupNCCL.cpp:1411] [PG 0 Rank 2] Heartbeat "
          "monitor timed out! Process will be terminated after dumping debug info. "
          "workMetaList_.size()=1");
  CHECK(s.category == "hang_watchdog_stuck");
  CHECK(s.rank == 2);
  s =
      one("[PG 0 Rank 5] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
          "progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API "
          "hang blocking the watchdog");
  CHECK(s.rank == 5);
  CHECK(s.facts.at("stuck_s") == "480");
  s = one("muster: rank 3 is hung: SIGABRT sent; last heartbeats: rank 0 1.2 s ago");
  CHECK(s.category == "hang_watchdog_stuck");
  CHECK(s.rank == 3);
  CHECK(s.facts.at("source") == "muster");
  // ranks hung at once: one waiting on another names it, and the hang is the other's
  const std::string waited =
      "; last heartbeats: rank 0: step 2, 10135 ms ago, rank 1: step 1, "
      "10137 ms ago, rank 2: step 1, 10137 ms ago; waited on: rank 1, 2 "
      "(step 1 of 2)";
  s = one("muster: rank 0 is hung: SIGABRT sent" + waited);
  CHECK(s.rank == 1);
  CHECK(s.more_ranks == std::vector<int>{2});
  CHECK(one("muster: rank 2 is hung: SIGABRT sent" + waited).rank == 2);
  CHECK(hang_waited_on("rank 0 is hung: SIGABRT sent" + waited) == std::vector<int>{1, 2});
  CHECK(hang_waited_on("rank 0 is hung: SIGABRT sent; last heartbeats: rank 0: never").empty());
  // the watchdog got stuck after the timeout it was handling: the timeout is the root
  const auto d = diagnose_lines(
      {"[PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
       "progress in monitoring enqueued collectives.",
       "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
       "OpType=ALLGATHER, NumelIn=64, NumelOut=128, Timeout(ms)=600000) ran for 600007 "
       "milliseconds before timing out."},
      2);
  CHECK(root_of(d).category == "nccl_timeout");
  CHECK_THAT(root_of(d).summary, Catch::Contains("rank 0 did not report"));
  CHECK(d.findings[1].category == "hang_watchdog_stuck");
  // muster saw the hang: the hung rank is the root and the timeouts are its knock-on effect
  const auto hung = diagnose_lines(
      {"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
       "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=60000) ran for 60001 milliseconds "
       "before timing out.",
       "muster: rank 1 is hung: SIGABRT sent; last heartbeats: rank 0 0.5 s ago"});
  CHECK(root_of(hung).category == "hang_watchdog_stuck");
  CHECK(root_of(hung).ranks == std::set<int>{1});
  CHECK(hung.findings[1].category == "nccl_timeout_cascade");
}

TEST_CASE("the NCCL timeout's progress line and the engine's collective line are timeouts",
          "[diagnose]") {
  auto s =
      one("[rank1]:[E1122 03:12:44 ProcessGroupNCCL.cpp:570] [Rank 1] Timeout at NCCL "
          "work: 1042, last enqueued NCCL work: 1042, last completed NCCL work: 1041.");
  CHECK(s.category == "nccl_timeout");
  CHECK(s.facts.at("seq") == "1042");
  CHECK(s.facts.at("last_completed") == "1041");
  s =
      one("muster-train: [rank 1/4 group world] all_reduce seq=12 bytes=4096 failed after at "
          "most 600000 ms; not arrived: 3 (at seq 11) (Connection closed by peer)");
  CHECK(s.category == "nccl_timeout");
  CHECK(s.rank == 1);
  CHECK(s.facts.at("op") == "all_reduce");
  CHECK(s.facts.at("seq") == "12");
  CHECK(s.facts.at("timeout_ms") == "600000");
  CHECK(s.facts.at("not_arrived") == "3");
  CHECK_FALSE(s.facts.contains("failed_ms"));  // the old line says no more
  s =
      one("muster-train: [rank 0/2 group world] all_gather seq=5 bytes=12 timed out after 1500 ms; "
          "not arrived: rank 1 (at seq 4) (Timed out waiting 1500ms for recv operation)");
  CHECK(s.category == "nccl_timeout");
  CHECK(s.rank == 0);
  CHECK(s.facts.at("op") == "all_gather");
  CHECK(s.facts.at("timeout_ms") == "1500");
  CHECK(s.facts.at("not_arrived") == "rank 1");
  CHECK_FALSE(s.facts.contains("failed_ms"));
}

TEST_CASE("the engine's group that did not form names the ranks that never joined it",
          "[diagnose]") {
  const std::string line =
      "muster-train: [rank 0/3 group world] connect timed out after 600000 ms; not arrived: rank "
      "2 (never joined the group) (Socket Timeout)";
  const auto s = one(line);
  CHECK(s.category == "nccl_timeout");
  CHECK(s.rank == 0);
  CHECK(s.facts.at("op") == "connect");
  CHECK(s.facts.at("group") == "world");
  CHECK(s.facts.at("timeout_ms") == "600000");
  CHECK(s.facts.at("not_arrived") == "rank 2");
  CHECK_FALSE(s.facts.contains("seq"));
  const auto d = diagnose_lines({line}, 3);
  REQUIRE(d.failed());
  const auto& root = root_of(d);
  CHECK(root.summary ==
        "the world group's connect timed out after 600000 ms on rank 0; never joined: rank 2");
  REQUIRE_FALSE(root.fixes.empty());
  CHECK_THAT(root.fixes[0], Catch::StartsWith("the ranks that never joined: their logs say where "
                                              "they stood (still starting"));
}

TEST_CASE("the engine's collective that failed before its timeout says how soon and why",
          "[diagnose]") {
  const std::string line =
      "muster-train: [rank 0/2 group ep0] all_to_all seq=298 bytes=2097152 failed after 812 ms "
      "(timeout 600000 ms); not arrived: none (every rank got there; the failure is in the "
      "transfer) ([./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:27539: Connection "
      "reset by peer)";
  const auto s = one(line);
  CHECK(s.category == "nccl_timeout");
  CHECK(s.facts.at("op") == "all_to_all");
  CHECK(s.facts.at("group") == "ep0");
  CHECK(s.facts.at("failed_ms") == "812");
  CHECK(s.facts.at("timeout_ms") == "600000");
  CHECK(
      s.facts.at("error") ==
      "[./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:27539: Connection reset by peer");
  // alone it is the root, and says it failed, not that it waited out 600000 ms
  const auto d = diagnose_lines({line}, 2);
  REQUIRE(d.failed());
  CHECK_THAT(root_of(d).summary,
             Catch::StartsWith("collective all_to_all seq 298 failed after 812 ms on rank 0, "
                               "before its 600000 ms timeout") &&
                 Catch::EndsWith("; the error: [./gloo/transport/tcp/pair.cc:589] Read error "
                                 "[127.0.0.1]:27539: Connection reset by peer") &&
                 !Catch::Contains("timed out"));
  REQUIRE_FALSE(root_of(d).fixes.empty());
  CHECK_THAT(root_of(d).fixes.front(), Catch::Contains("died first"));
  for (const auto& fix : root_of(d).fixes) CHECK_THAT(fix, !Catch::Contains("comm.timeout"));
  // beside a rank's death it is that death's knock-on
  const auto both = diagnose_lines({line, "srun: error: gpu-a07: task 1: Killed"}, 2);
  REQUIRE(both.findings.size() == 2);
  CHECK(root_of(both).category == "worker_killed_sigkill");
  const auto knock_on = std::find_if(both.findings.begin(), both.findings.end(), [](const auto& f) {
    return f.category == "nccl_timeout_cascade";
  });
  REQUIRE(knock_on != both.findings.end());
  CHECK_THAT(knock_on->summary, Catch::StartsWith("knock-on: collective all_to_all seq 298 failed "
                                                  "after 812 ms"));
}

TEST_CASE("c10d and torchelastic rendezvous timeouts are rendezvous_timeout", "[diagnose]") {
  auto s =
      one("[W1122 03:01:02 socket.cpp:752] [c10d] The client socket has timed out after "
          "900000ms while trying to connect to (10.1.2.3, 29500).");
  CHECK(s.category == "rendezvous_timeout");
  CHECK(s.facts.at("address") == "10.1.2.3, 29500");
  s =
      one("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
          "1/2 clients joined.");
  CHECK(s.facts.at("joined") == "1/2");
  // the rank that said it is named: the one that tried another address, or reached none
  CHECK_THAT(root_of(diagnose_lines({"[rank1]: [c10d] The client socket has timed out after "
                                     "900000ms while trying to connect to (127.0.0.1, 40298)."}))
                 .summary,
             Catch::EndsWith("(127.0.0.1, 40298); said by rank 1"));
  CHECK(one("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError").category ==
        "rendezvous_timeout");
  CHECK(one("RuntimeError: Timed out initializing process group in store based barrier on rank: "
            "0, for key: store_based_barrier_key:1 (world_size=2, worker_count=1, "
            "timeout=0:30:00)")
            .category == "rendezvous_timeout");
  s =
      one("muster-train: [rank 1/2] cannot reach the rendezvous store at 10.1.2.3:29500: Socket "
          "Timeout");
  CHECK(s.category == "rendezvous_timeout");
  CHECK(s.facts.at("address") == "10.1.2.3:29500");
  const auto d =
      diagnose_lines({"torch.distributed.elastic.rendezvous.api."
                      "RendezvousTimeoutError"});
  CHECK_THAT(root_of(d).fixes[1], Catch::Contains("launch.timeout_rendezvous"));
}

TEST_CASE("a Ray channel timeout carries the Pai-Megatron-Patch fix", "[diagnose]") {
  const auto s = one(
      "ray.exceptions.RayChannelTimeoutError: System error: If the execution is expected to take "
      "a long time, increase RAY_CGRAPH_get_timeout which is currently 10 seconds. Otherwise, "
      "this may indicate that the execution is hanging.");
  CHECK(s.category == "ray_channel_timeout");
  CHECK(s.facts.at("timeout_s") == "10");
  const auto d =
      diagnose_lines({"(WorkerDict pid=4411) ray.exceptions.RayChannelTimeoutError: "
                      "System error: Timed out waiting for object available to read."});
  CHECK_THAT(root_of(d).fixes[0],
             Catch::Contains("tensor parallel size > 1") && Catch::Contains("enforce_eager"));
  CHECK_THAT(root_of(d).fixes[1], Catch::Contains("RAY_CGRAPH_get_timeout"));
}

TEST_CASE("torchelastic's agent and srun say which worker died and how", "[diagnose]") {
  auto s =
      one("E1122 03:12:50.123 2211 torch/distributed/elastic/multiprocessing/api.py:826] "
          "failed (exitcode: -9) local_rank: 0 (pid: 280966) of binary: /usr/bin/python3");
  CHECK(s.category == "worker_killed_sigkill");
  CHECK(s.facts.at("local_rank") == "0");
  CHECK(s.facts.at("pid") == "280966");
  s =
      one("torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 2 "
          "(pid: 280968) of binary: /usr/bin/python3");
  CHECK(s.category == "worker_failed_see_error_file");
  CHECK(s.facts.at("exit_code") == "1");
  s = one("srun: error: gpu-a07: task 3: Killed");
  CHECK(s.category == "worker_killed_sigkill");
  CHECK(s.rank == 3);
  CHECK(s.facts.at("host") == "gpu-a07");
  s = one("srun: error: gpu-a08: task 5: Exited with exit code 1");
  CHECK(s.category == "worker_failed_see_error_file");
  CHECK(s.rank == 5);
  CHECK(s.facts.at("exit_code") == "1");
  CHECK_FALSE(
      match_log_line("srun: error: Unable to create step for job 4242: Job/step already "
                     "completing or completed"));
  // a kill with no OOM evidence says so; with the kernel's OOM line the OOM is the root
  auto d = diagnose_lines({"srun: error: gpu-a07: task 3: Killed"});
  CHECK(root_of(d).category == "worker_killed_sigkill");
  CHECK_THAT(root_of(d).summary, Catch::Contains("no evidence of an OOM kill"));
  CHECK(root_of(d).hosts == std::set<std::string>{"gpu-a07"});
  d = diagnose_lines({"srun: error: gpu-a07: task 3: Killed",
                      "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of "
                      "the step tasks have been OOM Killed."});
  CHECK(root_of(d).category == "host_oom_kill");
  CHECK(d.findings[1].category == "worker_killed_sigkill");
}

TEST_CASE("ChildFailedError: the root-cause entry's error.json decides the category",
          "[diagnose]") {
  muster::test::temp_dir dir;
  const auto error_json = (dir / "error.json").string();
  muster::test::write_file(
      error_json,
      R"({"message": {"message": "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 512.00 MiB is free. Of the allocated memory 77.00 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.", "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1795000000"}}})");
  const std::vector<std::string> block = {
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
      "============================================================",
      "pretrain_gpt.py FAILED",
      "------------------------------------------------------------",
      "Failures:",
      "[1]:",
      "  time      : 2026-11-22_03:12:44",
      "  host      : gpu-a07",
      "  rank      : 9 (local_rank: 1)",
      "  exitcode  : -15 (pid: 280967)",
      "  error_file: <N/A>",
      "  traceback : Signal 15 (SIGTERM) received by PID 280967",
      "------------------------------------------------------------",
      "Root Cause (first observed failure):",
      "[0]:",
      "  time      : 2026-11-22_03:12:40",
      "  host      : gpu-a07",
      "  rank      : 8 (local_rank: 0)",
      "  exitcode  : 1 (pid: 280966)",
      "  error_file: " + error_json,
      "  traceback : Traceback (most recent call last):",
      "============================================================"};
  const auto d = diagnose_lines(block, 16, "torchrun.log");
  const auto& root = root_of(d);
  CHECK(root.category == "cuda_oom");
  CHECK(root.ranks == std::set<int>{8});
  CHECK(root.hosts == std::set<std::string>{"gpu-a07"});
  CHECK(root.facts.at("tried_to_allocate") == "1.00 GiB");
  CHECK(root.evidence.front().file == error_json);
  // the SIGTERM'd worker is its agent's knock-on, not a finding; the failed worker is said
  // once, by its cause
  for (const auto& f : d.findings) CHECK(f.category != "worker_killed_sigkill");
  CHECK(d.findings.size() == 1);

  // without the file on this host: the exit decides, and the fix says where the file is
  auto other_host = block;
  other_host[19] = "  error_file: /tmp/torchelastic_gone/attempt_0/0/error.json";
  const auto far = diagnose_lines(other_host, 16, "torchrun.log");
  CHECK(root_of(far).category == "worker_failed_see_error_file");
  CHECK(root_of(far).ranks == std::set<int>{8});
  CHECK_THAT(root_of(far).fixes[0],
             Catch::Contains("/tmp/torchelastic_gone/attempt_0/0/error.json") &&
                 Catch::Contains("gpu-a07"));
  // an error file that no classifier line matches: its message is the finding's
  muster::test::write_file(error_json,
                           R"({"message": {"message": "ValueError: bad token id 99999"}})");
  const auto plain = diagnose_lines(block, 16, "torchrun.log");
  CHECK(root_of(plain).category == "worker_failed_see_error_file");
  CHECK_THAT(root_of(plain).summary, Catch::EndsWith("failed with exit code 1: ValueError: bad "
                                                     "token id 99999"));
  // a root cause killed by SIGKILL, with no file
  auto killed = block;
  killed[18] = "  exitcode  : -9 (pid: 280966)";
  killed[19] = "  error_file: <N/A>";
  killed[20] = "  traceback : Signal 9 (SIGKILL) received by PID 280966";
  CHECK(root_of(diagnose_lines(killed, 16)).category == "worker_killed_sigkill");
}

TEST_CASE(
    "Megatron's CUDA_DEVICE_MAX_CONNECTIONS assertion and NCCL-UB with expandable segments "
    "are env_misconfig",
    "[diagnose]") {
  auto s =
      one("[rank0]: AssertionError: Using tensor model parallelism or context parallelism "
          "require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1");
  CHECK(s.category == "env_misconfig");
  CHECK(s.facts.at("variable") == "CUDA_DEVICE_MAX_CONNECTIONS");
  CHECK(s.facts.at("wanted") == "1");
  CHECK(one("AssertionError: Using sequence parallelism requires setting the environment "
            "variable CUDA_DEVICE_MAX_CONNECTIONS to 1")
            .category == "env_misconfig");
  s =
      one("muster: musterd refused the step: [nccl-ub-expandable-segments] comm.nccl_ub = true "
          "and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True cannot be used together");
  CHECK(s.category == "env_misconfig");
  CHECK(s.facts.at("conflict") == "expandable_segments with NCCL user buffers");
  CHECK(one("RuntimeError: ncclCommRegister failed: buffer allocated with expandable_segments "
            "cannot be registered")
            .category == "env_misconfig");
  const auto d =
      diagnose_lines({"[rank0]: AssertionError: Using tensor model parallelism or "
                      "context parallelism require setting the environment variable "
                      "CUDA_DEVICE_MAX_CONNECTIONS to 1"});
  CHECK_THAT(root_of(d).fixes[0], Catch::Contains("musterd"));
  // decoys: the variable printed, expandable segments asked for alone
  CHECK_FALSE(match_log_line("environment: CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_DEBUG=WARN"));
  CHECK_FALSE(match_log_line("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
}

TEST_CASE("checkpoints that do not fit the model are checkpoint_mismatch", "[diagnose]") {
  auto s =
      one("\tsize mismatch for decoder.layers.0.mlp.linear_fc1.weight: copying a param "
          "with shape torch.Size([4096, 1024]) from checkpoint, the shape in current model "
          "is torch.Size([2048, 1024]).");
  CHECK(s.category == "checkpoint_mismatch");
  CHECK(s.facts.at("tensor") == "decoder.layers.0.mlp.linear_fc1.weight");
  CHECK(s.facts.at("checkpoint_shape") == "torch.Size([4096, 1024])");
  CHECK(s.facts.at("model_shape") == "torch.Size([2048, 1024])");
  CHECK(one("RuntimeError: Error(s) in loading state_dict for GPTModel:").category ==
        "checkpoint_mismatch");
  CHECK(one("\tMissing key(s) in state_dict: \"decoder.final_layernorm.weight\".")
            .facts.at("problem") == "missing keys");
  CHECK(one("muster-train: /ckpt/step-100: tensor model.embed_tokens.weight has shape [512, "
            "256], the model needs 65536 elements; the checkpoint is of another model (compare "
            "its config.json with the job's model section)")
            .category == "checkpoint_mismatch");
  // muster-train's checkpoint of another layout: its optimizer state, with the way round it
  const auto layout = diagnose_lines(
      {"[rank0] muster-train: checkpoint /ckpt/step-00000010 was saved with world_size = 2, this "
       "run has 4; its optimizer state is sharded for that layout: run with the same layout, or "
       "set checkpoint.load_optim = false to take its weights and step with a fresh optimizer"},
      4);
  REQUIRE(layout.failed());
  CHECK(root_of(layout).category == "checkpoint_mismatch");
  CHECK(root_of(layout).facts.at("layout") == "world_size = 2, this run has 4");
  CHECK_THAT(root_of(layout).summary,
             Catch::Contains("sharded for another layout on rank 0: it was saved with "
                             "world_size = 2, this run has 4"));
  REQUIRE(root_of(layout).fixes.size() == 2);
  CHECK_THAT(root_of(layout).fixes[1], Catch::Contains("checkpoint.load_optim = false"));
  // the root, with a cascade of timeouts on the ranks that loaded fine
  const auto d = diagnose_lines(
      {"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
       "OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
       "milliseconds before timing out.",
       "[rank1]: RuntimeError: Error(s) in loading state_dict for GPTModel:",
       "[rank1]: \tsize mismatch for embedding.word_embeddings.weight: copying a param with "
       "shape torch.Size([50304, 4096]) from checkpoint, the shape in current model is "
       "torch.Size([32000, 4096])."},
      2);
  CHECK(root_of(d).category == "checkpoint_mismatch");
  CHECK(d.findings[1].category == "nccl_timeout_cascade");
}

TEST_CASE("decoys for the new categories are no failure", "[diagnose]") {
  const auto d = diagnose_lines({
      "[rank0]: using RAY_CGRAPH_get_timeout=300",
      "srun: error: gpu-a07: task 0: Exited with exit code 0",  // a clean exit is no failure
      "W1122 torch/distributed/elastic/multiprocessing/api.py: Sending process 280967 closing "
      "signal SIGTERM",
      "NCCL INFO NVLS multicast support is available on dev 0 (out of memory checks passed)",
      "loading checkpoint from /ckpt/step-100 (Missing keys are expected for the new head: none)",
  });
  for (const auto& f : d.findings) INFO(f.category << ": " << f.evidence.front().text);
  CHECK_FALSE(d.failed());
}

TEST_CASE("across files the lines' times order the timeouts: the earliest is the root",
          "[diagnose]") {
  diagnoser d(4);
  // rank 0's log is read first, but its timeout (the DP all-reduce) came ten minutes after
  // rank 3's (an expert all-to-all): rank 3's is the root, rank 0's its knock-on effect
  d.add_line("rank-0.log", 7,
             "[rank0]:[E1122 03:22:44.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=1043, OpType=ALLREDUCE, "
             "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 "
             "milliseconds before timing out.",
             0);
  d.add_line("rank-3.log", 9,
             "[rank3]:[E1122 03:12:44.1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLTOALL_BASE, "
             "NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600001 milliseconds "
             "before timing out.",
             3);
  d.add_line("rank-1.log", 8,
             "[rank1]:[E1122 03:22:44.2 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=1043, OpType=ALLREDUCE, "
             "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 "
             "milliseconds before timing out.",
             1);
  const auto result = d.finish();
  REQUIRE(result.findings.size() == 2);
  const auto& root = root_of(result);
  CHECK(root.category == "nccl_timeout");
  CHECK(root.facts.at("op") == "ALLTOALL_BASE");
  CHECK(root.ranks == std::set<int>{3});
  // rank 2 reported no timeout at all: the usual culprit
  CHECK_THAT(root.summary, Catch::EndsWith("; rank 2 did not report"));
  CHECK(result.findings[1].category == "nccl_timeout_cascade");
  CHECK(result.findings[1].ranks == std::set<int>{0, 1});
  CHECK(result.findings[1].count == 2);

  // without times the first read is the root
  const auto untimed = diagnose_lines(
      {"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
       "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1000) ran for 1001 milliseconds "
       "before timing out.",
       "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6, "
       "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1000) ran for 1001 milliseconds "
       "before timing out."});
  CHECK(root_of(untimed).facts.at("seq") == "5");
}

TEST_CASE("ranks that died after their own timeout are the timeout's, not its root", "[diagnose]") {
  const std::string timeout =
      "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
      "NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600003 milliseconds before timing out.";
  // the watchdog aborts each rank that timed out; srun and torchelastic report the deaths
  const auto d = diagnose_lines({"[Rank 0" + timeout, "[Rank 1" + timeout,
                                 "srun: error: gpu-a07: tasks 0-1: Aborted (core dumped)",
                                 "E1122 torch/distributed/elastic/multiprocessing/api.py:826] "
                                 "failed (exitcode: -6) local_rank: 0 (pid: 1) of binary: x"},
                                3);
  const auto& root = root_of(d);
  CHECK(root.category == "nccl_timeout");
  CHECK_THAT(root.summary, Catch::EndsWith("; rank 2 did not report"));
  for (const auto& f : d.findings) CHECK(f.category != "worker_failed_see_error_file");
  // a rank that died without a timeout of its own is the culprit the others waited on
  const auto dead = diagnose_lines(
      {"[Rank 0" + timeout, "[Rank 1" + timeout, "srun: error: gpu-a08: task 2: Killed"}, 3);
  CHECK(root_of(dead).category == "worker_killed_sigkill");
  CHECK(root_of(dead).ranks == std::set<int>{2});
  CHECK(dead.findings[1].category == "nccl_timeout_cascade");
}

TEST_CASE("Gloo, torch's CPU backend: its timeout is a collective's, a closed peer a knock-on",
          "[diagnose]") {
  auto s =
      one("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
          "Timed out waiting 15000ms for recv operation to complete");
  CHECK(s.category == "nccl_timeout");
  CHECK(s.rank == 0);
  CHECK(s.facts.at("timeout_ms") == "15000");
  CHECK(s.facts.at("op") == "recv");
  auto d = diagnose_lines({"RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                           "waiting 1800000ms for send operation to complete"},
                          2, "rank-1.log");
  CHECK_THAT(root_of(d).summary,
             Catch::StartsWith("a collective's Gloo send timed out after 1800000 ms on rank "));
  // a peer that closed its end: beside the rank that failed first, the knock-on
  const std::string closed =
      "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
      "closed by peer [127.0.0.1]:36299";
  s = one(closed);
  CHECK(s.category == "nccl_system_error");
  CHECK(s.facts.at("backend") == "gloo");
  CHECK(one("[rank2]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read "
            "error [10.0.0.2]:4321: Connection reset by peer")
            .rank == 2);
  diagnoser both(2);
  both.add_line("job.log", 1, closed);
  both.add_signal({"worker_failed_see_error_file", 1, {{"error", "ValueError: bad token id"}}},
                  {"node-vm.db", 0, "rank 1 failed", std::nullopt});
  d = both.finish();
  CHECK(root_of(d).ranks == std::set<int>{1});
  REQUIRE(d.findings.size() == 2);
  CHECK(d.findings[1].ranks == std::set<int>{0});
  CHECK_THAT(d.findings[1].summary,
             Catch::StartsWith("Gloo: a peer closed its connection to rank 0"));
}

TEST_CASE("a rank a signal ended is named with the signal, and told where its stack is",
          "[diagnose]") {
  diagnoser d(2);
  d.add_signal({"worker_failed_see_error_file", 1, {{"signal", "11"}}},
               {"node-vm.db (ranks)", 2, "rank 1 ended by signal 11", std::nullopt});
  d.add_line("rank-1.log", 7, "Fatal Python error: Segmentation fault", 1);
  auto root = root_of(d.finish());
  CHECK_THAT(root.summary, Catch::StartsWith("rank 1 failed: signal 11 (SIGSEGV)"));
  REQUIRE(root.evidence.size() == 2);
  CHECK(root.evidence[1].text == "Fatal Python error: Segmentation fault");
  REQUIRE(root.fixes.size() == 1);
  CHECK_THAT(root.fixes[0], Catch::Contains("writes no error file even under @record") &&
                                Catch::Contains("PYTHONFAULTHANDLER=1"));
  // the log alone
  root = root_of(diagnose_lines({"[rank1]: Fatal Python error: Segmentation fault"}));
  CHECK(root.ranks == std::set<int>{1});
  CHECK_THAT(root.summary, Catch::Contains("failed: Fatal Python error: Segmentation fault"));
  // a bus error points at /dev/shm
  diagnoser bus(1);
  bus.add_signal({"worker_failed_see_error_file", 0, {{"signal", "7"}}},
                 {"node-vm.db (ranks)", 1, "rank 0 ended by signal 7", std::nullopt});
  CHECK_THAT(root_of(bus.finish()).fixes.at(0), Catch::Contains("/dev/shm"));
}

TEST_CASE("a failed rank quotes the last exception of its traceback, @record only for torchrun",
          "[diagnose]") {
  const std::string exited = "srun: error: gpu-a08: task 5: Exited with exit code 1";
  auto d = diagnose_lines({"[rank5]: Traceback (most recent call last):",
                           "[rank5]:     raise ValueError(\"bad token id 99999\")",
                           "[rank5]: ValueError: bad token id 99999", exited});
  auto root = root_of(d);
  CHECK(root.summary ==
        "rank 5 on gpu-a08 failed with exit code 1: ValueError: bad token id 99999");
  REQUIRE(root.evidence.size() == 2);
  CHECK(root.evidence[0].line == 3);
  CHECK(root.count == 2);
  REQUIRE(root.fixes.size() == 1);
  CHECK_THAT(root.fixes[0], Catch::Contains("the whole traceback is in job.log, from line 1"));
  // chained exceptions: the last is quoted; another rank's, and an error word that no
  // traceback ends, are not
  d = diagnose_lines({"[rank5]: Traceback (most recent call last):", "[rank5]: KeyError: 'x'",
                      "[rank5]: During handling of the above exception, another exception "
                      "occurred:",
                      "[rank5]: Traceback (most recent call last):",
                      "[rank5]: torch.distributed.DistBackendError: boom",
                      "[rank4]: Traceback (most recent call last):", "[rank4]: OSError: other",
                      "[rank5]: ValueError: logged, not raised", exited});
  CHECK_THAT(root_of(d).summary,
             Catch::EndsWith("exit code 1: torch.distributed.DistBackendError: boom"));
  CHECK(root_of(d).evidence[0].line == 5);
  // without a traceback: no quote, and no torchrun advice for a job that did not run torchrun
  root = root_of(diagnose_lines({"[rank5]: ValueError: logged, not raised", exited}));
  CHECK(root.summary == "rank 5 on gpu-a08 failed with exit code 1");
  CHECK_THAT(root.fixes.at(0), Catch::Contains("logs/rank-5.log") && !Catch::Contains("@record"));
  // torchrun's agent: its error file needs @record
  root = root_of(diagnose_lines(
      {"E1122 03:12:50.123 2211 torch/distributed/elastic/multiprocessing/api.py:826] failed "
       "(exitcode: 1) local_rank: 0 (pid: 280966) of binary: /usr/bin/python3"}));
  CHECK_THAT(root.fixes.at(0), Catch::Contains("@record"));
}

TEST_CASE("a host allocation the worker saw fail is host_memory_error, not a GPU OOM",
          "[diagnose]") {
  auto s = one("[rank1]: MemoryError");
  CHECK(s.category == "host_memory_error");
  CHECK(s.rank == 1);
  s =
      one("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB for an array "
          "with shape (1000000000,) and data type float64");
  CHECK(s.category == "host_memory_error");
  CHECK(s.facts.at("tried_to_allocate") == "7.45 GiB");
  s = one("MemoryError: Unable to allocate 7.45 GiB for an array with shape (1000000000,)");
  CHECK(s.facts.at("tried_to_allocate") == "7.45 GiB");
  s =
      one("RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't "
          "allocate memory: you tried to allocate 8000000000 bytes. Error code 12 (Cannot "
          "allocate memory)");
  CHECK(s.category == "host_memory_error");
  CHECK(s.facts.at("tried_to_allocate") == "8000000000");
  CHECK(one("terminate called after throwing an instance of 'std::bad_alloc'").category ==
        "host_memory_error");
  // CUDA's OutOfMemoryError is the GPU's; a word that only holds MemoryError is nothing
  CHECK(one("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").category ==
        "cuda_oom");
  CHECK_FALSE(match_log_line("torch.cuda.OutOfMemoryError"));
  CHECK_FALSE(match_log_line("class NoMemoryErrorHandler:"));
  const auto d = diagnose_lines({"[rank3]: MemoryError"});
  CHECK_THAT(root_of(d).summary,
             Catch::StartsWith("rank 3 could not allocate host memory, not GPU memory"));
}

TEST_CASE("srun's tasks in muster's own jobs are its launchers, one per node, not ranks",
          "[diagnose]") {
  const auto launchers = [](const std::vector<std::string>& lines) {
    diagnoser d(4);
    d.set_srun_tasks(diagnoser::srun_tasks::launchers);
    std::int64_t n = 0;
    for (const auto& line : lines) d.add_line("slurm.out", ++n, line);
    return d.finish();
  };
  // a launcher that refused its job: its own last line is the cause
  auto d = launchers({"muster: rendezvous store at 10.0.0.1:29400 (found through pmix)",
                      "1: muster: job.toml:4: launch.nproc = 9: more ranks than the 8 GPUs of "
                      "gpu-a08; set launch.nproc to 8 or fewer",
                      "srun: error: gpu-a08: task 1: Exited with exit code 2"});
  auto root = root_of(d);
  CHECK(root.category == "worker_failed_see_error_file");
  CHECK(root.ranks.empty());
  CHECK(root.hosts == std::set<std::string>{"gpu-a08"});
  CHECK_THAT(root.summary,
             Catch::StartsWith("muster's launcher on gpu-a08 (srun task 1) exited with exit code "
                               "2; its last line: 1: muster: job.toml:4: launch.nproc = 9"));
  CHECK_THAT(root.fixes.at(1), Catch::Contains("fix that input"));
  REQUIRE(root.evidence.size() == 2);
  CHECK(root.evidence[0].line == 2);
  // under srun -l each launcher's own line is its task's: node 0's is not node 1's reason, and
  // the label before a rank's line is no rank
  d = launchers({"1: muster: job.toml:4: launch.nproc = 9: more ranks than the 8 GPUs",
                 "0: muster: rank 3 failed first (exit code 1)",
                 "0: [rank 9] RuntimeError: CUDA error: out of memory",
                 "srun: error: gpu-a08: task 1: Exited with exit code 2"});
  REQUIRE(d.findings.size() == 3);  // rank 3's end, which node 0's launcher says, rank 9's OOM
  CHECK(root_of(d).category == "cuda_oom");
  CHECK(root_of(d).ranks == std::set<int>{9});
  CHECK(std::any_of(d.findings.begin(), d.findings.end(),
                    [](const auto& f) { return f.ranks == std::set<int>{3} && !f.root; }));
  CHECK_THAT(d.findings[2].summary, Catch::Contains("its last line: 1: muster: job.toml:4:"));
  // beside a rank's failure it is the knock-on, and names no rank
  d = launchers({"[rank 5] RuntimeError: CUDA error: out of memory",
                 "srun: error: gpu-a08: tasks 1-2: Exited with exit code 1"});
  REQUIRE(d.findings.size() == 2);
  CHECK(root_of(d).category == "cuda_oom");
  CHECK(d.findings[1].ranks.empty());
  CHECK_THAT(d.findings[1].summary,
             Catch::StartsWith("muster's launcher on gpu-a08 (srun tasks 1-2) exited with exit "
                               "code 1"));
  // two launchers are one finding, and a killed one says so
  d = launchers({"srun: error: gpu-a07: task 0: Killed", "srun: error: gpu-a08: task 1: Killed"});
  REQUIRE(d.findings.size() == 1);
  CHECK_THAT(root_of(d).summary,
             Catch::StartsWith("muster's launchers on gpu-a07, gpu-a08 ended: SIGKILL"));
  CHECK_THAT(root_of(d).fixes.back(), Catch::Contains("time limit or scancel"));
  // a stop asked explains them as it does ranks
  CHECK_FALSE(launchers({"slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2026-11-27T09:40:01 ***",
                         "srun: error: n1: task 0: Exited with exit code 143"})
                  .failed());
}

TEST_CASE("a node's launcher killed first is the root, and srun's end of the step no stop asked",
          "[diagnose]") {
  const auto launchers = [](const std::vector<std::string>& lines) {
    diagnoser d(2);
    d.set_srun_tasks(diagnoser::srun_tasks::launchers);
    std::int64_t n = 0;
    for (const auto& line : lines) d.add_line("slurm.out", ++n, line);
    return d.finish();
  };
  // as srun --kill-on-bad-exit=1 wrote them on a loopback Slurm when gpu-a02's launcher got
  // SIGKILL: srun ended the step (its STEP line is srun's doing, no scancel), and gpu-a01's
  // launcher, whose ranks were stopped, exited 1
  const std::string killed = "srun: error: gpu-a02: task 1: Killed";
  const std::string ends_step = "srun: launch/slurm: _step_signal: Terminating StepId=4242.0";
  const std::string step_cancel =
      "slurmstepd-gpu-a01: error: *** STEP 4242.0 ON gpu-a01 CANCELLED AT 2026-11-27T16:23:13 ***";
  auto d = launchers(
      {killed, ends_step, step_cancel, "srun: error: gpu-a01: task 0: Exited with exit code 1"});
  CHECK_FALSE(d.stopped_as_asked);
  REQUIRE(d.findings.size() == 2);
  CHECK(root_of(d).category == "worker_killed_sigkill");
  CHECK(root_of(d).hosts == std::set<std::string>{"gpu-a02"});
  CHECK_THAT(root_of(d).summary,
             Catch::StartsWith("muster's launcher on gpu-a02 (srun task 1) ended: SIGKILL"));
  CHECK(d.findings[1].category == "worker_failed_see_error_file");
  CHECK(d.findings[1].hosts == std::set<std::string>{"gpu-a01"});
  CHECK_FALSE(d.findings[1].root);
  // srun's SIGKILL of the other launcher is its own knock-on, not one finding with the first
  d = launchers({killed, ends_step, step_cancel, "srun: error: gpu-a01: task 0: Killed",
                 "srun: Force Terminated StepId=4242.0"});
  REQUIRE(d.findings.size() == 2);
  CHECK(root_of(d).hosts == std::set<std::string>{"gpu-a02"});
  CHECK(d.findings[1].hosts == std::set<std::string>{"gpu-a01"});
  CHECK_THAT(d.findings[1].summary, Catch::Contains("after srun ended the step"));
  // ranks too: the first read is the root, a SIGKILL as well as an exit code
  d = diagnose_lines(
      {"srun: error: n1: task 3: Killed", "srun: error: n1: task 5: Exited with exit code 1"});
  CHECK(root_of(d).ranks == std::set<int>{3});
  // a step cancelled before srun ended it was asked (scancel of the step or of an srun job)
  CHECK_FALSE(launchers({step_cancel, "srun: error: gpu-a01: task 0: Exited with exit code 143",
                         ends_step, "srun: error: gpu-a02: task 1: Killed"})
                  .failed());
}

TEST_CASE("logs alone: srun's tasks are launchers after a launcher's first line", "[diagnose]") {
  const auto lines = [](const std::vector<std::string>& text) {
    diagnoser d(16);  // no set_srun_tasks: as `muster diagnose --log slurm-4242.out`
    std::int64_t n = 0;
    for (const auto& line : text) d.add_line("slurm-4242.out", ++n, line);
    return d.finish();
  };
  const auto start = [](int node) {
    return node_start_line(node, 2, "gpu-a0" + std::to_string(node + 7), node * 8, 8, 16,
                           "/runs/tiny-moe-4242");
  };
  CHECK(start(1) ==
        "muster: node 1 of 2 (gpu-a08) starts ranks 8-15 of 16; run directory /runs/tiny-moe-4242");
  CHECK(node_start_line(0, 1, "n1", 0, 1, 1, "/r") ==
        "muster: node 0 of 1 (n1) starts rank 0 of 1; run directory /r");
  CHECK(is_node_start_line(start(0)));
  CHECK_FALSE(is_node_start_line("muster: rank 3 failed first (exit code 1)"));
  // muster's job: task 1 is gpu-a08's launcher, not rank 1, and its first line is no reason
  auto d = lines({std::string("0: ") + start(0), std::string("1: ") + start(1),
                  "1: [rank 9] RuntimeError: CUDA error: out of memory",
                  "srun: error: gpu-a08: task 1: Exited with exit code 1"});
  REQUIRE(d.findings.size() == 2);
  CHECK(root_of(d).ranks == std::set<int>{9});
  CHECK(d.findings[1].ranks.empty());
  CHECK_THAT(
      d.findings[1].summary,
      Catch::StartsWith("muster's launcher on gpu-a08 (srun task 1) exited with exit code 1"));
  CHECK_THAT(d.findings[1].summary, !Catch::Contains("its last line"));
  // a plain srun job (no launcher's line): task 1 is rank 1
  d = lines({"srun: error: gpu-a08: task 1: Exited with exit code 1"});
  CHECK(root_of(d).ranks == std::set<int>{1});
}

TEST_CASE("srun's task ranges and padded labels give every rank", "[diagnose]") {
  auto s = one("srun: error: gpu-a07: tasks 0-3,6: Killed");
  CHECK(s.rank == 0);
  CHECK(s.more_ranks == std::vector<int>{1, 2, 3, 6});
  s = one("srun: error: gpu-a07: task 5: Segmentation fault (core dumped)");
  CHECK(s.category == "worker_failed_see_error_file");
  CHECK(s.facts.at("signal_name") == "Segmentation fault (core dumped)");
  CHECK(s.facts.at("signal") == "11");  // strsignal's words, as a number
  CHECK(one("srun: error: gpu-a07: task 2: User defined signal 1").facts.at("signal") == "10");
  CHECK_FALSE(one("srun: error: gpu-a07: task 2: Something else").facts.contains("signal"));
  // a task a SIGUSR1 ended that nothing asked to stop: Slurm's warning the program did not handle
  auto usr1 = root_of(diagnose_lines({"srun: error: gpu-a07: task 2: User defined signal 1"}));
  CHECK(usr1.ranks == std::set<int>{2});
  CHECK_THAT(usr1.summary, Catch::Contains("failed: User defined signal 1"));
  REQUIRE_FALSE(usr1.fixes.empty());
  CHECK_THAT(usr1.fixes[0], Catch::Contains("no handler for SIGUSR1") &&
                                Catch::Contains("--signal=B:USR1@<seconds>") &&
                                Catch::Contains("exits with 138") &&
                                Catch::Contains("slurm.checkpoint_lead = 0"));
  // a segfault gets the crash's advice
  CHECK_THAT(root_of(diagnose_lines({"srun: error: gpu-a07: task 5: Segmentation fault (core "
                                     "dumped)"}))
                 .fixes.at(0),
             Catch::Contains("a crash in native code"));
  CHECK_FALSE(match_log_line("srun: error: gpu-a07: tasks 0-7: Terminated"));  // stopped by srun
  CHECK(one(" 3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.").rank ==
        3);
  const auto d = diagnose_lines({"srun: error: gpu-a07: tasks 0-3: Killed"});
  CHECK(root_of(d).ranks == std::set<int>{0, 1, 2, 3});
  CHECK_THAT(root_of(d).summary, Catch::StartsWith("rank 0, 1, 2, 3 on gpu-a07 was killed"));
}

TEST_CASE("the watchdog's timeout line and its progress line are one timeout", "[diagnose]") {
  const auto d = diagnose_lines(
      {"[rank1]:[E1122 03:12:44.1 ProcessGroupNCCL.cpp:570] [Rank 1] Timeout at NCCL work: 42, "
       "last enqueued NCCL work: 42, last completed NCCL work: 41.",
       "[rank1]:[E1122 03:12:44.2 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
       "operation timeout: WorkNCCL(SeqNum=42, OpType=REDUCE_SCATTER, NumelIn=64, NumelOut=32, "
       "Timeout(ms)=600000) ran for 600001 milliseconds before timing out."},
      2);
  REQUIRE(d.findings.size() == 1);
  CHECK(root_of(d).count == 2);
  CHECK_THAT(root_of(d).summary,
             Catch::StartsWith("collective REDUCE_SCATTER seq 42 timed out after 600000 ms on "
                               "rank 1 (last enqueued 42, last completed 41)"));
}

TEST_CASE("decoys from the review: warnings, application Xids, other services' ports",
          "[diagnose]") {
  // Megatron warns (it does not assert) for Megatron-FSDP with TP on Hopper
  CHECK_FALSE(match_log_line(
      "WARNING: warn_rank_0: Megatron-FSDP with tensor parallelism requires setting the "
      "environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1 for best overlap"));
  // application and clean-up Xids are not the GPU's fault; 79 is
  CHECK_FALSE(
      match_log_line("NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch "
                     "00000008, intr 00000000. MMU Fault"));
  CHECK_FALSE(
      match_log_line("NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000008"));
  CHECK_FALSE(match_log_line("NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception"));
  CHECK(one("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.").category ==
        "gpu_hardware_fault");
  // another service's port
  CHECK_FALSE(match_log_line("OSError: [Errno 98] Address already in use (tensorboard 6006)"));
  // NCCL's generic system-error text names sockets without being a network error
  auto s =
      one("[rank0]: torch.distributed.DistBackendError: NCCL error in: "
          "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
          "details), NCCL version 2.21.5 ncclSystemError: System call (e.g. socket, malloc) "
          "or external library call failed or device error.");
  CHECK(s.category == "nccl_system_error");
  CHECK_FALSE(s.facts.count("sub_cause"));
  // host OOM in older Slurm and the kernel's cgroup words
  s =
      one("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your "
          "processes may have been killed by the cgroup out-of-memory handler.");
  CHECK(s.category == "host_oom_kill");
  CHECK(s.facts.at("step") == "4242.0");
  CHECK(one("Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1kB").category ==
        "host_oom_kill");
  // a line mentioning localhost:29500 inside a failures block starts no entry
  const auto d = diagnose_lines(
      {"Failures:", "[W socket.cpp:464] [c10d] localhost:29500 slow", "  traceback : nothing"});
  CHECK_FALSE(d.failed());
}

TEST_CASE("a rendezvous host name that does not resolve is named, with launch.master_addr",
          "[diagnose]") {
  const std::string gai =
      "[W1127 09:44:02.118 socket.cpp:759] [c10d] The IPv4 network addresses of (n1, 29500) "
      "cannot be retrieved (gai error: -2 - Name or service not known).";
  const auto d = diagnose_lines(
      {gai, gai,
       "[W1127 09:49:02.120 socket.cpp:752] [c10d] The client socket has timed out after "
       "300000ms while trying to connect to (n1, 29500)."});
  REQUIRE(d.findings.size() == 1);
  const auto& f = root_of(d);
  CHECK(f.category == "rendezvous_timeout");
  CHECK(f.count == 3);
  CHECK(f.facts.at("unresolved") == "n1");
  CHECK_THAT(f.summary, Catch::StartsWith("the ranks cannot resolve the rendezvous host n1 (-2 - "
                                          "Name or service not known)"));
  CHECK_THAT(f.fixes.front(), Catch::StartsWith("set launch.master_addr to an address"));
  CHECK(diagnose_lines({"[c10d] The network addresses of (n1, 29500) cannot be retrieved (gai "
                        "error: -3 - Temporary failure in name resolution)."})
            .failed());
  // the IPv6 line is a warning healthy runs print (IPv4 answers next): no finding, whatever
  // the resolver said
  for (const char* why : {"-2 - Name or service not known",
                          "-9 - Address family for hostname "
                          "not supported"})
    CHECK_FALSE(diagnose_lines({std::string("[c10d] The IPv6 network addresses of (localhost, "
                                            "51595) cannot be retrieved (gai error: ") +
                                why + ")."})
                    .failed());
}

TEST_CASE("muster's launchers that did not meet are rendezvous_timeout, naming the nodes",
          "[diagnose]") {
  // node_group's own message (node 2 of 3 arrived, node 1 did not), as the CLI prints it
  auto store = std::make_shared<muster::launcher::rendezvous::memory_store>();
  store->set("node/2", R"({"host": "gpu-a03", "local_ranks": 4, "pid": 1})");
  const auto line =
      "muster: " + muster::test::expect_error(muster::errc::environment, [&] {
        muster::launcher::rendezvous::node_group(store, 0, {"gpu-a01", "gpu-a02", "gpu-a03"})
            .join({0, "gpu-a01", 4, 2}, std::chrono::milliseconds(300), nullptr);
      });
  const auto start = node_start_line(0, 3, "gpu-a01", 0, 4, 12, "/runs/r");
  const std::string exited = "srun: error: gpu-a01: task 0: Exited with exit code 1";
  // logs alone, plain and under srun -l (whose label is the launcher's task, not a rank)
  for (const auto& lines : std::vector<std::vector<std::string>>{
           {start, line, exited}, {"0: " + start, "0: " + line, exited}, {"0: " + line}}) {
    INFO(lines.front());
    const auto d = diagnose_lines(lines, 12);
    const auto& root = root_of(d);
    CHECK(root.category == "rendezvous_timeout");
    CHECK(root.ranks.empty());
    CHECK(root.facts.at("missing") == "gpu-a02 (node 1)");
    CHECK(root.hosts == std::set<std::string>{"gpu-a02"});  // the node to look at
    CHECK(root.facts.at("arrived") == "gpu-a01 (node 0), gpu-a03 (node 2)");
    CHECK(root.summary ==
          "muster's launchers did not meet: 2 of 3 nodes reached the rendezvous within 1 s; "
          "missing: gpu-a02 (node 1)");
    REQUIRE(root.fixes.size() == 3);
    CHECK_THAT(root.fixes[1],
               Catch::Contains("reach gpu-a01") && Catch::Contains("launch.master_addr"));
    CHECK_THAT(root.fixes[2], Catch::Contains("launch.timeout_rendezvous (1 s now)"));
    // the launcher's end is its knock-on, and does not quote the line again
    for (const auto& f : d.findings) CHECK((f.category == "rendezvous_timeout" || !f.root));
    for (const auto& f : d.findings) CHECK_THAT(f.summary, !Catch::Contains("its last line"));
  }
  // node 1's side: it found no store of node 0
  const auto d = diagnose_lines(
      {"muster: rendezvous: no rendezvous store of job 42 step 0 found within 60 s: no address "
       "file /runs/r/rendezvous-step0.addr and no answer on 10.0.0.1 ports 29400-29415. Check "
       "that node 0's launcher (gpu-a01) is running (its output), that 10.0.0.1 resolves and is "
       "reachable from gpu-a02 (or set launch.master_addr), or raise launch.timeout_rendezvous"});
  CHECK(root_of(d).category == "rendezvous_timeout");
  CHECK(root_of(d).summary ==
        "muster's launcher on gpu-a02 found no rendezvous store of node 0 (gpu-a01) within 60 s");
  CHECK_THAT(root_of(d).fixes.at(1),
             Catch::Contains("10.0.0.1") && Catch::Contains("launch.master_addr"));
  CHECK(root_of(d).hosts == std::set<std::string>{"gpu-a02"});
  // several missing, and more than the line lists
  CHECK(root_of(diagnose_lines({"muster: rendezvous: 1 of 20 nodes reached the rendezvous within "
                                "60 s. Arrived: gpu-a01 (node 0). Missing: gpu-a02 (node 1), "
                                "gpu-b07 (node 2) and 17 more. Check that srun started"}))
            .hosts == std::set<std::string>{"gpu-a02", "gpu-b07"});
  // the launchers' end of a start is not the rendezvous
  CHECK_FALSE(
      match_log_line("muster: rendezvous: 1 of 2 nodes reached the end of start 0 within "
                     "40 s. Arrived: gpu-a01 (node 0). Missing: gpu-a02 (node 1). Their "
                     "launchers did not stop their ranks within launch.kill_grace + 30 s"));
}

TEST_CASE("a job stopped as asked is no failure: scancel, a requeue, a signal passed on",
          "[diagnose]") {
  const std::string cancel =
      "slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2026-11-27T09:40:01 ***";
  const std::string requeue =
      "slurmstepd: error: *** JOB 6 ON n1 CANCELLED AT 2026-11-27T09:41:12 DUE TO JOB REQUEUE ***";
  const std::string passed_on =
      "muster: the ranks stopped on the SIGUSR1 passed on to them, as asked (the built-in engine "
      "saves a checkpoint first; exit code 138); logs in /runs/x/logs";
  const std::string term = "srun: error: n1: task 0: Exited with exit code 143";
  const std::string usr1 = "srun: error: n2: tasks 0-1: Exited with exit code 138";
  for (const auto& lines : std::vector<std::vector<std::string>>{
           {cancel, term, "srun: error: n2: task 1: Exited with exit code 143"},
           {term, cancel},  // the stop's line after the ends it explains
           {requeue, usr1},
           {passed_on, usr1},
           {"muster: stopped by SIGTERM; logs in /runs/x/logs", term}}) {
    INFO(lines.front());
    const auto d = diagnose_lines(lines);
    CHECK_FALSE(d.failed());
    REQUIRE(d.stopped_as_asked);
    CHECK(d.stopped_as_asked->line == (lines.front() == term ? 2 : 1));
  }
  // without a stop asked, the same ends are failures
  auto d = diagnose_lines({term});
  REQUIRE(d.failed());
  CHECK(root_of(d).category == "worker_failed_see_error_file");
  CHECK_FALSE(d.stopped_as_asked);
  // a stop does not excuse a worker that failed otherwise
  d = diagnose_lines({cancel, "srun: error: n1: task 0: Exited with exit code 1", term});
  REQUIRE(d.failed());
  CHECK(root_of(d).facts.at("exit_code") == "1");
  // srun makes SIGKILL of a cancel's SIGTERM: Slurm's stop explains it, the launcher's does not
  CHECK_FALSE(diagnose_lines({cancel, "srun: error: n1: task 0: Killed"}).failed());
  d = diagnose_lines({passed_on, "srun: error: n1: task 0: Killed"});
  CHECK(root_of(d).category == "worker_killed_sigkill");
  // a node failure or a preemption is no stop the user asked
  for (const char* why :
       {"DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "DUE TO PREEMPTION ***"}) {
    d = diagnose_lines(
        {std::string("slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2026-11-27T09:40:01 ") + why,
         term});
    INFO(why);
    CHECK(d.failed());
    CHECK_FALSE(d.stopped_as_asked);
  }
  // the stop's own lines and the ends it explains are no suspicious lines either: a scancel
  // of a muster-sbatch job as a loopback Slurm wrote it
  const std::vector<std::string> scancel = {
      "slurmstepd-gpu-a01: error: *** JOB 4242 ON gpu-a01 CANCELLED AT 2026-11-27T16:23:23 ***",
      "muster: rank 1 failed first (signal 15 (SIGTERM)); 0 other rank(s) stopped. Log: "
      "/runs/r/logs/rank-1.log",
      "muster: rank 1 on gpu-a02 failed first: signal 15 (SIGTERM); 1 rank(s) of this node "
      "stopped. Logs: /runs/r/logs",
      "slurmstepd-gpu-a01: error: *** STEP 4242.0 ON gpu-a01 CANCELLED AT 2026-11-27T16:23:23 ***",
      "srun: error: gpu-a01: task 0: Exited with exit code 143",
      "srun: launch/slurm: _step_signal: Terminating StepId=4242.0",
      "srun: error: gpu-a02: task 1: Exited with exit code 143",
      "srun: error: gpu-a02: tasks 2-3: Terminated"};
  d = diagnose_lines(scancel);
  CHECK_FALSE(d.failed());
  REQUIRE(d.stopped_as_asked);
  CHECK(d.stopped_as_asked->line == 1);
  CHECK(d.suspicious.empty());
  // a line the stop does not explain still is one; without a stop, the same lines are
  auto more = scancel;
  more.push_back("[rank0]: ValueError: bad shape (4096, 1024) for the router");
  d = diagnose_lines(more);
  REQUIRE(d.suspicious.size() == 1);
  CHECK(d.suspicious[0].line == 9);
  // without the stop, the launcher's word that rank 1 ended on SIGTERM first is a failure
  d = diagnose_lines({scancel[1], scancel[7]});
  CHECK_FALSE(d.stopped_as_asked);
  CHECK(d.failed());
  CHECK(root_of(d).ranks == std::set<int>{1});
  CHECK_THAT(root_of(d).summary, Catch::StartsWith("rank 1 failed: signal 15 (SIGTERM)"));
  // the time limit is no stop asked: it is a finding of its own
  d = diagnose_lines(
      {"slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-11-27T09:42:00 DUE TO TIME LIMIT ***",
       term});
  CHECK(root_of(d).category == "slurm_time_limit");
  CHECK_FALSE(d.stopped_as_asked);
}

TEST_CASE("a muster-sbatch job's fixes name its [slurm] keys, and sacct its job", "[diagnose]") {
  const std::string limit =
      "slurmstepd: error: *** JOB 4242 ON n1 CANCELLED AT 2026-11-27T09:42:00 DUE TO TIME "
      "LIMIT ***";
  // a job of one's own: sbatch's options
  auto d = diagnose_lines({limit});
  CHECK_THAT(root_of(d).fixes.front(), Catch::Contains("sbatch --time"));
  // muster-sbatch's: its keys
  diagnoser sbatched;
  sbatched.set_slurm_job("4242", true);
  sbatched.add_line("slurm.out", 1, limit);
  d = sbatched.finish();
  REQUIRE(root_of(d).fixes.size() == 2);
  CHECK(root_of(d).fixes[0] == "ask for more time (slurm.time)");
  CHECK_THAT(root_of(d).fixes[1], Catch::Contains("slurm.checkpoint_lead = 300") &&
                                      Catch::Contains("slurm.requeue = true"));
  // a lead its time limit allows (muster-sbatch refuses one not below it), or, where one was set,
  // that it came too late
  diagnoser minute;
  minute.set_slurm_job("4242", true);
  minute.set_time_limit(60, 0);
  minute.add_line("slurm.out", 1, limit);
  d = minute.finish();
  CHECK_THAT(root_of(d).fixes[1], Catch::Contains("slurm.checkpoint_lead = 15 (seconds)"));
  diagnoser late;
  late.set_slurm_job("4242", true);
  late.set_time_limit(3600, 30);
  late.add_line("slurm.out", 1, limit);
  d = late.finish();
  CHECK_THAT(root_of(d).fixes[1], Catch::Contains("its checkpoint_lead's USR1, 30 s before the "
                                                  "limit, left too little time to save and stop"));
  // a rank killed: sacct names the run's job, where a log alone has no job to name
  const std::string killed = "muster: rank 1 on n1 (pid 77) failed first: signal 9 (SIGKILL)";
  diagnoser known;
  known.set_slurm_job("4242", false);
  known.add_line("job.log", 1, killed);
  d = known.finish();
  CHECK_THAT(fmt::format("{}", fmt::join(root_of(d).fixes, "\n")),
             Catch::Contains("sacct -j 4242 --format") && !Catch::Contains("<job>"));
  CHECK_THAT(fmt::format("{}", fmt::join(root_of(diagnose_lines({killed})).fixes, "\n")),
             Catch::Contains("sacct -j <job> --format"));
}

TEST_CASE(
    "beside a peer's closed connection, the timeout of the rank that failed first is the root",
    "[diagnose]") {
  // rank 1 timed out in NCCL and exited; rank 0, in a Gloo collective with it, saw it go
  const std::vector<std::string> lines = {
      "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
      "closed by peer [127.0.0.1]:27539",
      "[rank1]: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
      "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600007 "
      "milliseconds before timing out."};
  // a log alone: the network error is the likelier cause (a peer's death seen from its end)
  REQUIRE(root_of(diagnose_lines(lines, 2)).category == "nccl_system_error");
  // the store says rank 1 failed first: its timeout is the root, rank 0's error its effect
  diagnoser d(2);
  d.set_first_failed_rank(1);
  std::int64_t n = 0;
  for (const auto& line : lines) d.add_line("job.log", ++n, line);
  const auto result = d.finish();
  CHECK(root_of(result).category == "nccl_timeout");
  CHECK(root_of(result).ranks == std::set<int>{1});
  REQUIRE(result.findings.size() == 2);
  CHECK(result.findings[1].category == "nccl_system_error");
  // a failure that names its cause stays the root, wherever the launcher saw the first end
  diagnoser oom(2);
  oom.set_first_failed_rank(1);
  oom.add_line("job.log", 1, lines[1]);
  oom.add_line("job.log", 2,
               "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
  CHECK(root_of(oom.finish()).category == "cuda_oom");
}

TEST_CASE("a hung Python rank's faulthandler stack says where it stood", "[diagnose]") {
  diagnoser d(2);
  // rank 1's own log: its last line, then what faulthandler wrote on the hang's SIGABRT
  const std::vector<std::string> rank1 = {
      "step 3 done",
      "Fatal Python error: Aborted",
      "",
      "Thread 0x00007f0000000700 (most recent call first):",
      "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait",
      "",
      "Current thread 0x00007f0000000000 (most recent call first):",
      "  File \"/work/train.py\", line 38 in train_step",
      "  File \"/work/train.py\", line 52 in <module>"};
  std::int64_t n = 0;
  for (const auto& line : rank1) d.add_line("logs/rank-1.log", ++n, line, 1);
  d.add_line("launcher.log", 1,
             "muster: rank 1 is hung: SIGABRT sent; last heartbeats: rank 0 0.5 s ago, rank 1 "
             "9.1 s ago");
  const auto result = d.finish();
  const auto& root = root_of(result);
  CHECK(root.category == "hang_watchdog_stuck");
  CHECK(root.facts.at("stood_at") == "File \"/work/train.py\", line 38 in train_step");
  CHECK_THAT(root.summary,
             Catch::EndsWith("; rank 1 stood at File \"/work/train.py\", line 38 in train_step"));
  CHECK(root.evidence.front().file == "logs/rank-1.log");
  CHECK(root.evidence.front().line == 8);
  // a traceback's frames are no dump: nothing stood anywhere
  diagnoser raised(2);
  raised.add_line("logs/rank-1.log", 1, "Traceback (most recent call last):", 1);
  raised.add_line("logs/rank-1.log", 2, "  File \"/work/train.py\", line 38 in train_step", 1);
  raised.add_line("launcher.log", 1, "muster: rank 1 is hung: SIGABRT sent; last heartbeats: -");
  CHECK_FALSE(root_of(raised.finish()).facts.contains("stood_at"));
}

TEST_CASE("ranks hung at once: the one whose stack stood outside a collective is the hang",
          "[diagnose]") {
  diagnoser d(3);
  const auto stack = [&](int rank, const std::string& frame) {
    const auto log = "logs/rank-" + std::to_string(rank) + ".log";
    d.add_line(log, 1, "Fatal Python error: Aborted", rank);
    d.add_line(log, 2, "Current thread 0x00007f0000000000 (most recent call first):", rank);
    d.add_line(log, 3, frame, rank);
  };
  const std::string in_all_reduce =
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line "
      "1541 in all_reduce";
  // the launcher's hang lines, then what each rank's faulthandler dumped on its SIGABRT
  for (int rank = 0; rank < 3; ++rank)
    d.add_line("launcher.log", rank + 1,
               fmt::format("muster: rank {} is hung: SIGABRT sent; last heartbeats: rank 0: step "
                           "3, 3087 ms ago, rank 1: step 3, 3088 ms ago, rank 2: step 3, 3088 ms "
                           "ago",
                           rank));
  stack(0, in_all_reduce);
  stack(1, "  File \"/work/train.py\", line 18 in <module>");
  stack(2, in_all_reduce);
  const auto result = d.finish();
  const auto& root = root_of(result);
  CHECK(root.category == "hang_watchdog_stuck");
  CHECK(root.ranks == std::set<int>{1});
  // the aborts the hang detection sent them all are no finding of their own
  CHECK(result.findings.size() == 1);
  CHECK_THAT(root.summary,
             Catch::Contains("rank 1 hung: its heartbeat stopped") &&
                 Catch::Contains("it stood outside any collective while ranks 0, 2 waited in "
                                 "theirs (their stacks); rank 1 stood at File \"/work/train.py\", "
                                 "line 18 in <module>"));
  // every stack in a collective: nothing tells them apart, every rank is said
  diagnoser all(2);
  for (int rank = 0; rank < 2; ++rank) {
    const auto log = "logs/rank-" + std::to_string(rank) + ".log";
    all.add_line(log, 1, "Current thread 0x00007f0000000000 (most recent call first):", rank);
    all.add_line(log, 2, in_all_reduce, rank);
    all.add_line("launcher.log", rank + 1,
                 fmt::format("muster: rank {} is hung: SIGABRT sent; last heartbeats: -", rank));
  }
  CHECK(root_of(all.finish()).ranks == std::set<int>{0, 1});
  // a data loader's queue waits in threading.py: no collective, that rank is the hang
  diagnoser loader(2);
  for (int rank = 0; rank < 2; ++rank)
    loader.add_line("launcher.log", rank + 1,
                    fmt::format("muster: rank {} is hung: SIGABRT sent; last heartbeats: -", rank));
  loader.add_line("logs/rank-0.log", 1,
                  "Current thread 0x00007f0000000000 (most recent call first):", 0);
  loader.add_line("logs/rank-0.log", 2, in_all_reduce, 0);
  loader.add_line("logs/rank-1.log", 1,
                  "Current thread 0x00007f0000000000 (most recent call first):", 1);
  loader.add_line("logs/rank-1.log", 2,
                  "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait", 1);
  CHECK(root_of(loader.finish()).ranks == std::set<int>{1});
}

TEST_CASE("a CUDA OOM's fixes leave out what the job does already", "[diagnose]") {
  const std::string oom =
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
      "has a total capacity of 79.15 GiB of which 1.00 GiB is free.";
  const auto fixes = [&](std::map<std::string, std::string> settings) {
    diagnoser d(2);
    if (!settings.empty()) d.set_memory_settings(std::move(settings));
    d.add_line("job.log", 1, oom);
    return fmt::format("{}", fmt::join(root_of(d.finish()).fixes, "\n"));
  };
  // a log alone: every change
  CHECK_THAT(fixes({}), Catch::Contains("optim_grads_params") &&
                            Catch::Contains("train.recompute = \"full\"") &&
                            Catch::Contains("lower train.micro_batch_size"));
  // ZeRO-3, full recompute, micro batch 1 without packing: only what is left
  const auto left = fixes({{"parallel.sharding", "optim_grads_params"},
                           {"train.recompute", "full"},
                           {"train.micro_batch_size", "1"},
                           {"train.max_tokens_per_pack", "0"}});
  CHECK_THAT(left, !Catch::Contains("optim_grads_params") && !Catch::Contains("train.recompute") &&
                       !Catch::Contains("micro_batch_size") &&
                       Catch::Contains("raise parallel.context"));
  // packing: its size, with its value
  CHECK_THAT(fixes({{"parallel.sharding", "optim"},
                    {"train.recompute", "selective"},
                    {"train.micro_batch_size", "1"},
                    {"train.max_tokens_per_pack", "8192"}}),
             Catch::Contains("lower train.max_tokens_per_pack (now 8192)") &&
                 !Catch::Contains("micro_batch_size") && Catch::Contains("optim_grads_params") &&
                 Catch::Contains("train.recompute"));
}

TEST_CASE("a muster line that quotes a first failure is not the launcher's word of it",
          "[diagnose]") {
  diagnoser d(2);
  d.add_line("logs/rank-0.log", 1,
             "muster: restarting the ranks (1 of 2) after rank 1 on vm failed first: exit code 7",
             0);
  CHECK_FALSE(d.finish().failed());
  CHECK(root_of(diagnose_lines({"muster: rank 1 on vm failed first: exit code 7"})).ranks ==
        std::set<int>{1});
}

TEST_CASE("Ctrl-C's tracebacks and an environment dump are no suspicious lines", "[diagnose]") {
  const auto d = diagnose_lines({"[rank 0] TORCHELASTIC_ERROR_FILE=/runs/x/logs/rank-0.error",
                                 "[rank 1] Traceback (most recent call last):",
                                 "[rank 1]   File \"train.py\", line 9, in <module>",
                                 "[rank 1] KeyboardInterrupt",
                                 "muster: stopped by SIGINT; logs in /runs/x/logs"});
  CHECK_FALSE(d.failed());
  CHECK(d.stopped_as_asked);
  CHECK(d.suspicious.empty());
  // a traceback of another exception stays suspicious
  const auto other =
      diagnose_lines({"[rank 1] Traceback (most recent call last):", "[rank 1] KeyError: 'x'",
                      "muster: stopped by SIGINT; logs in /runs/x/logs"});
  REQUIRE(other.suspicious.size() == 2);  // its start and its KeyError
  CHECK(other.suspicious[0].line == 1);
}

TEST_CASE("every rank hung at once is not said to have waited on another", "[diagnose]") {
  const std::vector<std::string> lines = {
      "muster: rank 0 is hung: SIGABRT sent; last heartbeats: rank 0: step 12, 3010 ms ago, "
      "rank 1: step 12, 3004 ms ago",
      "muster: rank 1 is hung: SIGABRT sent; last heartbeats: rank 0: step 12, 3010 ms ago, "
      "rank 1: step 12, 3004 ms ago"};
  const auto both = diagnose_lines(lines, 2);
  REQUIRE(both.failed());
  CHECK(root_of(both).category == "hang_watchdog_stuck");
  CHECK_THAT(root_of(both).summary, Catch::Contains("their heartbeats stopped") &&
                                        Catch::Contains("every rank stopped at once") &&
                                        !Catch::Contains("the other ranks waited"));
  // one of four: the others waited on it
  const auto one = diagnose_lines({lines[0]}, 4);
  CHECK_THAT(root_of(one).summary, Catch::Contains("the other ranks waited on it"));
}

TEST_CASE("a node's launcher gone with its ranks is the root, not the collectives it failed",
          "[diagnose]") {
  diagnoser d(4);
  d.add_line("slurm.out", 1,
             "0: [rank 0] [2026-11-28 15:02:10.412] [engine] [error] [rank 0/4 group world] "
             "all_gather seq=440 bytes=65536 failed after 176 ms (timeout 600000 ms); not "
             "arrived: rank 2 (at seq 439), rank 3 (at seq 439) (Connection closed by peer)");
  d.add_line("slurm.out", 2,
             "0: muster: stopping the workers: the launcher on n2 (node 1) is gone: its "
             "connection to the rendezvous store closed while its ranks ran (killed, or n2 went "
             "down); its ranks ended with it. See n2's output and `dmesg` there for why");
  const auto result = d.finish();
  const auto& root = root_of(result);
  CHECK(root.category == "node_failure");
  CHECK(root.hosts == std::set<std::string>{"n2"});
  CHECK_THAT(root.summary, Catch::StartsWith("the launcher on n2 vanished with its ranks (killed, "
                                             "or the node went down)"));
  CHECK_THAT(root.fixes.front(), Catch::Contains("scontrol show node n2"));
  REQUIRE(result.findings.size() == 2);
  CHECK(result.findings[1].category == "nccl_timeout_cascade");
}

TEST_CASE("Gloo's Socket Timeout at the rendezvous names the ranks that said none", "[diagnose]") {
  // rank 0's log: its process group waited for rank 1, which never came (still starting)
  const std::string line = "RuntimeError: Socket Timeout";
  CHECK(one(line).category == "rendezvous_timeout");
  diagnoser local(2);
  local.set_num_nodes(1);
  local.add_line("logs/rank-0.log", 7, line, 0);
  const auto d = local.finish();
  const auto& root = root_of(d);
  CHECK(root.summary == "the ranks did not meet at the rendezvous; said by rank 0; rank 1 said "
                        "no timeout: the one that never arrived?");
  REQUIRE(root.fixes.size() == 2);
  CHECK_THAT(root.fixes[0], Catch::StartsWith("look at where rank 1 stood"));
  // on one node the ranks meet on its loopback: no network to check
  CHECK_THAT(root.fixes[1], Catch::StartsWith("a rank or node that starts late"));
  // several nodes: the network's fix too
  diagnoser nodes(2);
  nodes.set_num_nodes(2);
  nodes.add_line("logs/rank-0.log", 7, line, 0);
  const auto two = nodes.finish();
  REQUIRE(root_of(two).fixes.size() == 3);
  CHECK_THAT(root_of(two).fixes[1], Catch::Contains("MASTER_ADDR:MASTER_PORT"));
}
