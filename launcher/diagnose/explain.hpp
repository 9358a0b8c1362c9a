// What a finding means for people: its one-line summary and the fixes in the order to try
// them, naming the setting to change (muster's config key, and the Megatron / torchrun / Slurm
// / NCCL flag for jobs muster did not launch). One function per category family; pure.
#pragma once

#include "launcher/diagnose/diagnosis.hpp"

namespace muster::launcher::diagnose {

// Fills f.summary and f.fixes from f.category and f.facts. `world_size` (0: unknown) lets a
// timeout name the ranks that did not report.
void explain(finding& f, int world_size);

}  // namespace muster::launcher::diagnose
