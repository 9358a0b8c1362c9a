// Choosing MASTER_PORT: see master_port.hpp.
#include "launcher/master_port.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace muster::launcher {

int choose_master_port(int configured) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  MUSTER_CHECK(fd >= 0, errc::io, "socket: {}", std::strerror(errno));
  // As torch's TCPStore will bind it: SO_REUSEADDR, every address.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(configured));
  socklen_t len = sizeof addr;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int err = errno;
  ::close(fd);
  MUSTER_CHECK(ok || configured == 0 || err != EADDRINUSE, errc::invalid_input,
               "launch.master_port={}: the port is in use on this host (another job or program "
               "listens on it); set launch.master_port=0 to let muster pick a free port, or "
               "choose another",
               configured);
  MUSTER_CHECK(ok, errc::io, "cannot bind a port for MASTER_PORT ({}): {}",
               configured == 0 ? "any" : std::to_string(configured), std::strerror(err));
  return ntohs(addr.sin_port);
}

}  // namespace muster::launcher
