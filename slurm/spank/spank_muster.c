/* spank_muster: Slurm's SPANK plugin that gives every task of every job step on a node the
 * site's GPU environment policy from that node's musterd, so even a plain `srun python
 * train.py` gets it (muster launch asks the daemon itself as well; the answers agree).
 *
 * By context (the one dispatch file; the parts are muster_config, muster_env, muster_client):
 *   srun, sbatch, salloc   registers --muster-policy and --muster-off; a bad --muster-policy
 *                          fails there, before anything is queued.
 *   slurmstepd             in slurm_spank_user_init, once per step and node: the request with
 *                          the job and step, so the node records the decisions (bounded by
 *                          record_timeout_ms; a failure is logged only); in
 *                          slurm_spank_task_init, just before each task execs: the request
 *                          without them (answered at once, the same for every task), applied
 *                          with spank_setenv / spank_unsetenv; MUSTER_SPANK_POLICY says what it
 *                          did.
 *   anything else          nothing.
 * The step's layout: --muster-policy, else MUSTER_POLICY in the job's environment, else none.
 * A daemon that is not there or does not answer within timeout_ms is logged and the task runs
 * as it is; with required=1 the task fails. A combination the policy refuses (nccl_ub with
 * expandable_segments, ...) always fails the task, with the policy's message.
 * Only slurm_spank_* and the plugin's identity are exported (spank_muster.map). */
#include <slurm/slurm.h> /* SLURM_BATCH_SCRIPT and the other special step ids */
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "muster_client.h"
#include "muster_config.h"
#include "muster_env.h"

SPANK_PLUGIN(muster, 1);

static struct {
  int loaded; /* config parsed */
  struct muster_config config;
  char* policy; /* --muster-policy, NULL when not given */
  int off;      /* --muster-off */
} state;

static int on_policy(int val, const char* optarg, int remote) {
  struct muster_policy p;
  char err[512];
  (void)val;
  (void)remote;
  if (muster_policy_parse(optarg, &p, err, sizeof err) != 0) {
    slurm_error("muster: --muster-policy: %s", err);
    return -1;
  }
  free(state.policy);
  state.policy = strdup(optarg ? optarg : "");
  return 0;
}

static int on_off(int val, const char* optarg, int remote) {
  (void)val;
  (void)optarg;
  (void)remote;
  state.off = 1;
  return 0;
}

static struct spank_option options[] = {
    {"muster-policy", "LAYOUT",
     "the step's layout for musterd's GPU environment policy: tp=N,cp=N,ep=N,sharding=MODE and "
     "features such as nccl_ub or expandable_segments (muster's Slurm guide lists them)",
     1, 0, on_policy},
    {"muster-off", NULL, "run this job's tasks without musterd's GPU environment policy", 0, 0,
     on_off},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char** av) {
  const spank_context_t context = spank_context();
  char err[512];
  if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR) return 0;
  if (!state.loaded) {
    if (muster_config_parse(ac, av, &state.config, err, sizeof err) != 0) {
      slurm_error("muster: plugstack.conf: %s", err);
      return -1;
    }
    state.loaded = 1;
  }
  for (struct spank_option* o = options; o->name; ++o) {
    const spank_err_t rc = spank_option_register(sp, o);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("muster: cannot register --%s: %s", o->name, spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

/* "4242", and the step as Slurm names it in squeue: "0", "batch", "extern", "interactive". */
static void step_name(uint32_t step, char* out, size_t len) {
  if (step == SLURM_BATCH_SCRIPT)
    snprintf(out, len, "batch");
  else if (step == SLURM_EXTERN_CONT)
    snprintf(out, len, "extern");
  else if (step == SLURM_INTERACTIVE_STEP)
    snprintf(out, len, "interactive");
  else
    snprintf(out, len, "%u", step);
}

/* How to start musterd on this node: systemd's unit where systemd runs (sd_booted's test),
 * else the daemon by hand on the plugin's socket. */
static void start_hint(char* out, size_t len) {
  if (access("/run/systemd/system", F_OK) == 0)
    snprintf(out, len, "systemctl start musterd");
  else
    snprintf(out, len,
             "no systemd runs this node: as root, musterd --socket %s > "
             "/var/log/musterd.log 2>&1 &",
             state.config.socket);
}

/* The daemon could not be asked: the task goes on without the policy, or fails (required). */
static int without_daemon(spank_t sp, const char* why, const char* job, const char* step,
                          int task) {
  char hint[256];
  start_hint(hint, sizeof hint);
  if (state.config.required) {
    slurm_error(
        "muster: job %s step %s task %d: musterd did not answer (%s) and plugstack.conf says "
        "required=1, so the task does not start; start the daemon (%s) or set required=0",
        job, step, task, why, hint);
    return -1;
  }
  slurm_error(
      "muster: job %s step %s task %d runs without the site's GPU policy: musterd did not answer "
      "(%s); start it (%s)",
      job, step, task, why, hint);
  char what[1100];
  snprintf(what, sizeof what, "none: musterd did not answer (%s)", why);
  spank_setenv(sp, "MUSTER_SPANK_POLICY", what, 1);
  return 0;
}

static int apply(spank_t sp, const struct muster_env_reply* reply, const char* job,
                 const char* step, int task) {
  int num_set = 0, num_unset = 0;
  for (size_t i = 0; i < reply->num_changes; ++i) {
    const struct muster_env_change* c = &reply->changes[i];
    const spank_err_t rc =
        c->value ? spank_setenv(sp, c->variable, c->value, 1) : spank_unsetenv(sp, c->variable);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("muster: job %s step %s task %d: cannot %s %s (rule %s): %s", job, step, task,
                  c->value ? "set" : "unset", c->variable, c->rule, spank_strerror(rc));
      return -1;
    }
    if (c->value) {
      slurm_verbose("muster: task %d: set %s=%s (%s)", task, c->variable, c->value, c->rule);
      ++num_set;
    } else {
      slurm_verbose("muster: task %d: unset %s (%s)", task, c->variable, c->rule);
      ++num_unset;
    }
  }
  char what[64];
  snprintf(what, sizeof what, "musterd: %d set, %d unset", num_set, num_unset);
  spank_setenv(sp, "MUSTER_SPANK_POLICY", what, 1);
  return 0;
}

/* What a request needs from Slurm about the step (and, in a task, the task). */
struct step_facts {
  char job[16], step[16];
  int task; /* the local task id; -1 outside a task */
  int gpus; /* the GPUs CUDA_VISIBLE_DEVICES names; -1 when it is not set */
  char** env;
  struct muster_policy policy;
};

/* The value of NAME in a "NAME=value" array, or NULL. */
static const char* env_value(char** env, const char* name) {
  const size_t n = strlen(name);
  for (char** e = env; e && *e; ++e)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

static int read_step(spank_t sp, int in_task, struct step_facts* f) {
  uint32_t job_id = 0, step_id = 0;
  char err[512];
  memset(f, 0, sizeof *f);
  f->task = -1;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_ENV, &f->env) != ESPANK_SUCCESS ||
      (in_task && spank_get_item(sp, S_TASK_ID, &f->task) != ESPANK_SUCCESS)) {
    slurm_error("muster: cannot read the job, step, task id or environment from Slurm");
    return -1;
  }
  snprintf(f->job, sizeof f->job, "%u", job_id);
  step_name(step_id, f->step, sizeof f->step);
  const char* layout = state.policy ? state.policy : env_value(f->env, "MUSTER_POLICY");
  if (muster_policy_parse(layout, &f->policy, err, sizeof err) != 0) {
    slurm_error("muster: job %s step %s: %s: %s", f->job, f->step,
                state.policy ? "--muster-policy" : "MUSTER_POLICY", err);
    return -1;
  }
  const char* visible = env_value(f->env, "CUDA_VISIBLE_DEVICES");
  f->gpus = visible ? muster_visible_gpus(visible) : -1;
  return 0;
}

/* Asks musterd `request` within timeout_ms. Returns 0 with *reply holding the daemon's answer
 * (the caller frees it), or -1 with `why` saying why there is none: no connection or answer, a
 * reply that is not one, or the daemon's refusal. */
static int ask_policy(const char* request, int timeout_ms, struct muster_env_reply* reply,
                      char* why, size_t len) {
  memset(reply, 0, sizeof *reply);
  char* line = muster_daemon_ask(state.config.socket, request, timeout_ms, why, len);
  if (!line) return -1;
  int rc = muster_env_reply_parse(line, strlen(line), reply, why, len);
  free(line);
  if (rc == 0 && !reply->ok) {
    snprintf(why, len, "it refused the request: %s: %s", reply->error_code, reply->error_message);
    rc = -1;
  }
  return rc;
}

/* Once per step on each node, before its tasks start: the node records the step's decisions
 * (a job-scoped request, which may wait for the daemon to ask Slurm who owns the job; the
 * tasks' own requests are answered at once). A record that cannot be made is logged only. */
int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  struct step_facts f;
  struct muster_env_reply reply;
  char why[1024] = "out of memory";
  (void)ac;
  (void)av;
  if (!spank_remote(sp) || state.off || state.config.record_timeout_ms == 0) return 0;
  if (read_step(sp, 0, &f) != 0) return 0; /* task_init says why, and fails the task */
  char* request = muster_env_request(f.job, f.step, &f.policy, f.gpus, f.env);
  if (!request || ask_policy(request, state.config.record_timeout_ms, &reply, why, sizeof why))
    slurm_verbose("muster: job %s step %s: the node keeps no record of its GPU policy: %s", f.job,
                  f.step, why);
  if (request) muster_env_reply_free(&reply);
  free(request);
  return 0;
}

/* Each task, just before it execs: the policy's answer, applied. Every task of a step asks
 * the same question without a job id, which the daemon answers at once, so all of them get the
 * same environment. */
int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  struct step_facts f;
  struct muster_env_reply reply;
  char why[1024];
  (void)ac;
  (void)av;
  if (!spank_remote(sp) || state.off) return 0;
  if (read_step(sp, 1, &f) != 0) return -1;
  char* request = muster_env_request(NULL, f.step, &f.policy, f.gpus, f.env);
  if (!request) {
    slurm_error("muster: out of memory building the request to musterd");
    return -1;
  }
  int rc = -1;
  if (ask_policy(request, state.config.timeout_ms, &reply, why, sizeof why) != 0) {
    rc = without_daemon(sp, why, f.job, f.step, f.task);
  } else if (reply.num_errors > 0) {
    for (size_t i = 0; i < reply.num_errors; ++i)
      slurm_error("muster: job %s step %s: the site's GPU policy refuses this step: %s", f.job,
                  f.step, reply.errors[i]);
  } else {
    rc = apply(sp, &reply, f.job, f.step, f.task);
  }
  muster_env_reply_free(&reply);
  free(request);
  return rc;
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  free(state.policy);
  state.policy = NULL;
  return 0;
}
