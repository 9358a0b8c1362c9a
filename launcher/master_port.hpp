// MASTER_PORT, the port the workers' rank 0 binds for torch.distributed's own store: the one
// launch.master_port names (checked free on this host first), else one the kernel reports free
// (bind to port 0), so nothing is guessed. Rank 0 binds it a moment later; the kernel does not
// hand the same port out again that soon.
// Not here: the launchers' rendezvous store (rendezvous/store_address.hpp).
#pragma once

namespace muster::launcher {

// `configured` (launch.master_port) when it is > 0 and free on every address of this host,
// else a free port. Throws errc::invalid_input naming launch.master_port and the fix when the
// configured port is taken, errc::io when no port can be had.
int choose_master_port(int configured);

}  // namespace muster::launcher
