// How long this process has been blocked in collectives: the time each wait for a collective
// took (the other ranks arriving, and the transfer), summed over every group. The trainer
// records a step's share beside its wall time; a straggler is the rank that waits least while
// the others wait for it (synchronous training makes every rank's step time alike).
#pragma once

namespace muster::engine::comm {

// Adds `seconds` of waiting (thread-safe).
void add_wait_seconds(double seconds);

// The seconds waited since the process started.
double waited_seconds();

}  // namespace muster::engine::comm
