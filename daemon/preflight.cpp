// Preflight checks: see preflight.hpp.
#include "daemon/preflight.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace muster::daemon {
namespace {

struct checker {
  preflight_result result;
  void add(std::string id, bool ok, std::string detail) {
    result.passed = result.passed && ok;
    result.checks.push_back({std::move(id), ok ? "pass" : "fail", std::move(detail)});
  }
  void skip(std::string id, std::string why) {
    result.checks.push_back({std::move(id), "skip", std::move(why)});
  }
};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// The devices the step was given, and the visibility check's verdict on them.
std::vector<const gpu_device*> given_devices(const preflight_facts& f, checker& c) {
  std::vector<const gpu_device*> out;
  const auto& devices = f.gpus.devices;
  const std::string none =
      f.gpus.source == "none" ? fmt::format(" ({})", f.gpus.why_none) : std::string();
  if (!f.allocated.empty()) {
    std::vector<std::string> missing;
    for (int index : f.allocated) {
      const auto it = std::find_if(devices.begin(), devices.end(),
                                   [&](const gpu_device& d) { return d.index == index; });
      if (it == devices.end())
        missing.push_back(std::to_string(index));
      else
        out.push_back(&*it);
    }
    if (missing.empty())
      c.add("gpus_visible", true, fmt::format("all {} GPUs given are visible", out.size()));
    else
      c.add("gpus_visible", false,
            fmt::format("GPU {} of the allocation not visible: the node shows {} GPU(s){}; check "
                        "the driver (nvidia-smi) and gres.conf, then drain the node",
                        fmt::join(missing, ", "), devices.size(), none));
    return out;
  }
  if (f.num_allocated < 0) {
    c.skip("gpus_visible", "the step named no GPUs");
    for (const auto& d : devices) out.push_back(&d);
    return out;
  }
  const bool ok = static_cast<int>(devices.size()) >= f.num_allocated;
  c.add("gpus_visible", ok,
        ok ? fmt::format("{} GPUs visible, {} allocated", devices.size(), f.num_allocated)
           : fmt::format("{} GPUs allocated but the node shows {}{}; check the driver "
                         "(nvidia-smi) and gres.conf, then drain the node",
                         f.num_allocated, devices.size(), none));
  for (int i = 0; i < std::min<int>(f.num_allocated, static_cast<int>(devices.size())); ++i)
    out.push_back(&devices[static_cast<std::size_t>(i)]);
  return out;
}

bool names_gpus(const preflight_facts& f) {
  return !f.allocated.empty() || f.num_allocated >= 0;
}

// Whether process `pid` belongs to another job that Slurm still runs, on a step that named no
// GPUs: that job's, not a leftover.
bool neighbour(const preflight_facts& f, std::int64_t pid) {
  if (names_gpus(f)) return false;
  const auto job = f.job_of_pid.find(pid);
  if (job == f.job_of_pid.end() || job->second.empty() || job->second == f.job_id) return false;
  const auto allocated = f.job_allocated.find(job->second);
  return allocated != f.job_allocated.end() && allocated->second;
}

void check_memory(const std::vector<const gpu_device*>& given, const preflight_facts& f,
                  const preflight_thresholds& l, checker& c) {
  std::vector<std::string> low;
  for (const auto* d : given) {
    std::int64_t neighbours = 0;  // MiB that other running jobs hold: not this step's loss
    for (const auto& p : d->processes)
      if (neighbour(f, p.pid)) neighbours += p.used_mib;
    const auto free = d->memory_free_mib + neighbours;
    if (d->memory_total_mib > 0 &&
        static_cast<double>(free) < l.min_free_fraction * d->memory_total_mib)
      low.push_back(fmt::format(
          "GPU {} has {} of {} MiB free{}", d->index, free, d->memory_total_mib,
          neighbours ? fmt::format(" besides other jobs' {} MiB", neighbours) : std::string()));
  }
  if (given.empty()) return c.skip("gpu_free_memory", "no GPUs to check");
  c.add("gpu_free_memory", low.empty(),
        low.empty() ? fmt::format("every GPU has at least {:.0f}% of its memory free",
                                  100 * l.min_free_fraction)
                    : join(low) + fmt::format(" (at least {:.0f}% must be free); see "
                                              "gpu_leftovers for who holds it",
                                              100 * l.min_free_fraction));
}

void check_leftovers(const std::vector<const gpu_device*>& given, const preflight_facts& f,
                     checker& c) {
  std::vector<std::string> found;
  std::vector<std::string> neighbours;  // "job 55 on GPU 1"
  for (const auto* d : given)
    for (const auto& p : d->processes) {
      const auto it = f.job_of_pid.find(p.pid);
      if (it != f.job_of_pid.end() && !f.job_id.empty() && it->second == f.job_id) continue;
      if (neighbour(f, p.pid)) {
        const auto one = fmt::format("job {} on GPU {}", it->second, d->index);
        if (std::find(neighbours.begin(), neighbours.end(), one) == neighbours.end())
          neighbours.push_back(one);
        continue;
      }
      const auto owner = it == f.job_of_pid.end() ? "gone or in another namespace"
                         : it->second.empty()     ? "of no job"
                                                  : "of job " + it->second;
      found.push_back(
          fmt::format("GPU {}: pid {} ({}) holds {} MiB", d->index, p.pid, owner, p.used_mib));
    }
  if (given.empty()) return c.skip("gpu_leftovers", "no GPUs to check");
  const auto others =
      neighbours.empty()
          ? std::string()
          : fmt::format(" ({} running there: the step named no GPUs, so theirs are no leftovers)",
                        join(neighbours));
  c.add("gpu_leftovers", found.empty(),
        found.empty() ? (neighbours.empty() ? "no other process holds GPU memory"
                                            : "no leftover process" + others)
                      : join(found) + others +
                            fmt::format("; kill {} (or let {} job end) before this step, ",
                                        found.size() == 1 ? "it" : "them",
                                        found.size() == 1 ? "its" : "their") +
                            "or drain the node: a step started now may OOM at step 0");
}

void check_ecc(const std::vector<const gpu_device*>& given, const preflight_thresholds& l,
               checker& c) {
  std::vector<std::string> bad;
  int counted = 0;
  for (const auto* d : given) {
    if (!d->ecc_uncorrected) continue;
    ++counted;
    if (static_cast<std::int64_t>(*d->ecc_uncorrected) > l.max_ecc_uncorrected)
      bad.push_back(
          fmt::format("GPU {}: {} uncorrected ECC errors", d->index, *d->ecc_uncorrected));
  }
  if (counted == 0) return c.skip("gpu_ecc", "no ECC counts reported");
  c.add("gpu_ecc", bad.empty(),
        bad.empty() ? fmt::format("uncorrected ECC errors within {}", l.max_ecc_uncorrected)
                    : join(bad) + fmt::format(" (at most {}); drain the node and reset the GPU "
                                              "(nvidia-smi -r) or have it serviced",
                                              l.max_ecc_uncorrected));
}

void check_xid(const std::vector<const gpu_device*>& given, const preflight_facts& f,
               const preflight_thresholds& l, checker& c) {
  if (!f.kernel_log.why_not.empty()) return c.skip("gpu_xid", f.kernel_log.why_not);
  std::vector<std::string> bad;
  int program_faults = 0;
  for (const auto& e : f.kernel_log.xids) {
    // an Xid on a GPU of another step is not this step's concern; one we cannot place is
    const bool ours = !e.pci || std::any_of(given.begin(), given.end(), [&](const gpu_device* d) {
      return pci_key(d->pci_bus_id) == e.pci;
    });
    if (!ours) continue;
    if (xid_is_hardware(e.xid))
      bad.push_back(e.message);
    else
      ++program_faults;
  }
  c.add("gpu_xid", bad.empty(),
        bad.empty()
            ? fmt::format("no hardware Xid in the last {} s{}", l.xid_window_s,
                          program_faults ? fmt::format(" ({} program faults)", program_faults)
                                         : std::string())
            : fmt::format("hardware Xid in the last {} s: {}; drain the node and look at it "
                          "(nvidia-smi -q, the driver's bug report)",
                          l.xid_window_s, join(bad)));
}

void check_shm(const preflight_facts& f, const preflight_thresholds& l, checker& c) {
  if (!f.shm_mib)
    return c.add("shm_size", false,
                 fmt::format("{} is missing: NCCL's shared-memory transport needs it; mount a "
                             "tmpfs there (or correct health.shm_dir)",
                             f.shm_dir));
  const bool ok = *f.shm_mib >= l.min_shm_mib;
  c.add("shm_size", ok,
        ok ? fmt::format("{} holds {} MiB", f.shm_dir, *f.shm_mib)
           : fmt::format("{} holds {} MiB, under {} MiB: NCCL fails with \"unhandled "
                         "system error\"; in a container pass --shm-size or --ipc=host",
                         f.shm_dir, *f.shm_mib, l.min_shm_mib));
}

void check_run_dir(const preflight_facts& f, const preflight_thresholds& l, checker& c) {
  if (f.run_dir.empty()) return c.skip("run_dir_writable", "the step named no run directory");
  if (!f.run_dir_problem.empty()) return c.add("run_dir_writable", false, f.run_dir_problem);
  const bool ok = !f.disk_free_mib || *f.disk_free_mib >= l.min_disk_free_mib;
  // a run directory not made yet is named, and the place it would be made in
  const auto where = f.run_dir_made_under.empty()
                         ? f.run_dir
                         : fmt::format("{} does not exist yet; {}, where it would be made,",
                                       f.run_dir, f.run_dir_made_under);
  c.add("run_dir_writable", ok,
        ok ? fmt::format("{} is writable{}", where,
                         f.disk_free_mib ? fmt::format(", {} MiB free", *f.disk_free_mib) : "")
           : fmt::format("{} has {} MiB free, under {} MiB: checkpoints and the run store will "
                         "fail; free space or choose another launch.runs_dir",
                         where, *f.disk_free_mib, l.min_disk_free_mib));
}

}  // namespace

preflight_result run_preflight(const preflight_facts& f, const preflight_thresholds& l) {
  checker c;
  const auto given = given_devices(f, c);
  check_memory(given, f, l, c);
  check_leftovers(given, f, c);
  check_ecc(given, l, c);
  check_xid(given, f, l, c);
  check_shm(f, l, c);
  check_run_dir(f, l, c);
  return c.result;
}

}  // namespace muster::daemon
