// A TCP port on loopback that nothing holds now: the kernel's pick for a bound, closed socket
// (a rendezvous store's MASTER_PORT in tests that start their own ranks).
#pragma once

namespace muster::test {

// Throws std::runtime_error when no socket can be bound.
int free_loopback_port();

}  // namespace muster::test
