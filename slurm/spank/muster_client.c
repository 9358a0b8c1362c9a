/* muster_client: see muster_client.h. */
#include "muster_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPLY (1024 * 1024)

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out, -1 error (errno). */
static int wait_for(int fd, short events, int64_t deadline) {
  while (1) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    const int rc = poll(&p, 1, (int)left);
    if (rc < 0 && errno == EINTR) continue;
    return rc < 0 ? -1 : rc > 0;
  }
}

char* muster_daemon_ask(const char* socket_path, const char* request, int timeout_ms, char* err,
                        size_t errlen) {
  const int64_t deadline = now_ms() + timeout_ms;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(socket_path) >= sizeof addr.sun_path) {
    snprintf(err, errlen, "socket path too long: %s", socket_path);
    return NULL;
  }
  strcpy(addr.sun_path, socket_path);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket(): %s", strerror(errno));
    return NULL;
  }
  char* reply = NULL;
  size_t len = 0, cap = 0;
  /* A unix-socket connect does not wait for accept(): it succeeds while the listen backlog has
   * room, else fails with EAGAIN (many tasks starting at once): then it is tried again every
   * 10 ms until the deadline. */
  while (connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) {
    if (errno == EAGAIN && now_ms() + 10 < deadline) {
      const struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    snprintf(err, errlen, "cannot connect to %s: %s", socket_path,
             errno == EAGAIN ? "its listen queue stayed full until the deadline" : strerror(errno));
    goto fail;
  }
  for (size_t sent = 0, total = strlen(request); sent < total;) {
    const int ready = wait_for(fd, POLLOUT, deadline);
    if (ready <= 0) {
      snprintf(err, errlen, "%s sending to %s", ready ? strerror(errno) : "timed out", socket_path);
      goto fail;
    }
    const ssize_t n = send(fd, request + sent, total - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      snprintf(err, errlen, "cannot send to %s: %s", socket_path, strerror(errno));
      goto fail;
    }
    sent += (size_t)n;
  }
  while (1) {
    char* nl = reply ? memchr(reply, '\n', len) : NULL;
    if (nl) {
      *nl = '\0';
      close(fd);
      return reply;
    }
    const int ready = wait_for(fd, POLLIN, deadline);
    if (ready == 0) {
      snprintf(err, errlen, "no answer from %s within %d ms", socket_path, timeout_ms);
      goto fail;
    }
    if (ready < 0) {
      snprintf(err, errlen, "poll on %s: %s", socket_path, strerror(errno));
      goto fail;
    }
    if (len + 4096 + 1 > cap) {
      if (cap >= MAX_REPLY) {
        snprintf(err, errlen, "a reply from %s over %d bytes", socket_path, MAX_REPLY);
        goto fail;
      }
      cap = cap ? cap * 2 : 8192;
      char* grown = realloc(reply, cap);
      if (!grown) {
        snprintf(err, errlen, "out of memory");
        goto fail;
      }
      reply = grown;
    }
    const ssize_t n = recv(fd, reply + len, cap - len - 1, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      snprintf(err, errlen, "%s closed the connection before answering%s%s", socket_path,
               n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
      goto fail;
    }
    len += (size_t)n;
  }
fail:
  free(reply);
  close(fd);
  return NULL;
}
