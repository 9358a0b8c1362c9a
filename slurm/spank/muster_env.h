/* muster_env: the SPANK plugin's `env` request to musterd and its reply (daemon/env_request.hpp
 * has the protocol), without I/O, so both are unit-tested without sockets.
 *
 * The step's layout comes from --muster-policy (or MUSTER_POLICY in the job's environment):
 *   tp=N,cp=N,ep=N,sharding=no_shard|optim|optim_grads|optim_grads_params,
 *   and the features nccl_ub, fsdp_double_buffer, tp_comm_overlap, ep_comm_overlap,
 *   expandable_segments, cuda_graphs, memory_tight, each bare (on) or =on|off|true|false|1|0.
 * Items are separated by commas; an empty text is the default layout (everything 1 / off). */
#ifndef MUSTER_ENV_H
#define MUSTER_ENV_H

#include <stddef.h>

struct muster_policy {
  int tp, cp, ep; /* 0: not given (the daemon's default, 1) */
  char sharding[24];
  /* -1: not given; 0 off; 1 on */
  int nccl_ub, fsdp_double_buffer, tp_comm_overlap, ep_comm_overlap, expandable_segments,
      cuda_graphs, memory_tight;
};

/* Parses `text` into *out. Returns 0, or -1 with `err` naming the item and the accepted forms
 * ("unknown key \"tpp\" in \"tpp=2\"; keys: tp, cp, ep, sharding, nccl_ub, ..."). */
int muster_policy_parse(const char* text, struct muster_policy* out, char* err, size_t errlen);

/* The variables the plugin sends the daemon from the task's environment: those of the CUDA,
 * NCCL and PyTorch families, which the policy reads. */
int muster_env_sent(const char* name_value);

/* The request line (with its '\n'), malloc'd; NULL when out of memory.
 * job_id NULL: not job-scoped (answered without recording). gpus < 0: not known (the daemon
 * takes the node's). env: NULL-terminated "NAME=value" strings, of which muster_env_sent ones
 * are sent. */
char* muster_env_request(const char* job_id, const char* step_id, const struct muster_policy* p,
                         int gpus, char* const* env);

/* The GPUs a CUDA_VISIBLE_DEVICES value names (its comma-separated non-empty items), 0 for
 * Slurm's "NoDevFiles" and for the empty string. */
int muster_visible_gpus(const char* cuda_visible_devices);

struct muster_env_change {
  char* variable;
  char* value; /* NULL: unset the variable */
  char* rule;
};

struct muster_env_reply {
  int ok;
  char *error_code, *error_message;  /* !ok: the daemon's error */
  struct muster_env_change* changes; /* ok: "set" then "unset", in the daemon's order */
  size_t num_changes;
  char** errors; /* ok: "rule: message" for each combination the policy refuses */
  size_t num_errors;
};

/* Parses one reply line. Returns 0, or -1 with `err` saying what is wrong with it (not JSON,
 * a field missing). *out is the caller's to free with muster_env_reply_free either way. */
int muster_env_reply_parse(const char* line, size_t len, struct muster_env_reply* out, char* err,
                           size_t errlen);
void muster_env_reply_free(struct muster_env_reply* reply);

#endif
