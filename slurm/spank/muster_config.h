/* muster_config: the plugin's arguments from plugstack.conf, parsed once per process.
 *
 *   required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_muster.so socket=/run/muster/musterd.sock \
 *       timeout_ms=1000 record_timeout_ms=4000 required=0
 *
 * socket      musterd's unix socket (default /run/muster/musterd.sock)
 * timeout_ms  how long a task waits for the daemon's answer, 1 to 60000 (default 1000)
 * record_timeout_ms  how long a step waits, once per node, for the daemon to record its
 *             decisions under the job (it may ask Slurm who owns the job first), 0 to 60000;
 *             0: no record (default 4000, above musterd's squeue timeout of 3000)
 * required    0: a daemon that does not answer is logged and the task runs without the site's
 *             policy (default); 1: the task fails
 * Unknown keys and bad values are errors that name the key and the value. */
#ifndef MUSTER_CONFIG_H
#define MUSTER_CONFIG_H

#include <stddef.h>

#define MUSTER_DEFAULT_SOCKET "/run/muster/musterd.sock"

struct muster_config {
  char socket[108]; /* sockaddr_un's sun_path */
  int timeout_ms;
  int record_timeout_ms;
  int required;
};

/* Parses plugstack.conf's arguments for this plugin. Returns 0, or -1 with `err` set. */
int muster_config_parse(int argc, char** argv, struct muster_config* out, char* err, size_t errlen);

#endif
