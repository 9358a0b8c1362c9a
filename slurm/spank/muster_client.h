/* muster_client: one request to musterd over its unix socket, bounded by a deadline. */
#ifndef MUSTER_CLIENT_H
#define MUSTER_CLIENT_H

#include <stddef.h>

/* Connects to `socket_path`, sends `request` (one line, with its '\n') and reads the reply
 * line, all within timeout_ms. Returns the reply without its '\n', malloc'd (the caller frees
 * it), or NULL with `err` saying which part failed and why ("cannot connect to /run/...:
 * No such file or directory", "no answer within 1000 ms"). */
char* muster_daemon_ask(const char* socket_path, const char* request, int timeout_ms, char* err,
                        size_t errlen);

#endif
