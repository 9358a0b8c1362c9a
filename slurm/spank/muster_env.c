/* muster_env: see muster_env.h. */
#include "muster_env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "muster_json.h"

static void set_err(char* err, size_t errlen, const char* what, ...) {
  va_list args;
  if (!errlen) return;
  va_start(args, what);
  vsnprintf(err, errlen, what, args);
  va_end(args);
}

/* ---- the layout ---- */

#define KEYS                                                                              \
  "tp, cp, ep, sharding, nccl_ub, fsdp_double_buffer, tp_comm_overlap, ep_comm_overlap, " \
  "expandable_segments, cuda_graphs, memory_tight"

static int parse_switch(const char* value, int* out) {
  static const char* const on[] = {"", "on", "true", "1", "yes"};
  static const char* const off[] = {"off", "false", "0", "no"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; ++i)
    if (strcmp(value, on[i]) == 0) return *out = 1, 0;
  for (size_t i = 0; i < sizeof off / sizeof off[0]; ++i)
    if (strcmp(value, off[i]) == 0) return *out = 0, 0;
  return -1;
}

static int parse_item(char* item, struct muster_policy* p, const char* text, char* err,
                      size_t errlen) {
  char* eq = strchr(item, '=');
  const char* value = eq ? eq + 1 : "";
  if (eq) *eq = '\0';
  struct {
    const char* name;
    int* field;
  } counts[] = {{"tp", &p->tp}, {"cp", &p->cp}, {"ep", &p->ep}},
    switches[] = {{"nccl_ub", &p->nccl_ub},
                  {"fsdp_double_buffer", &p->fsdp_double_buffer},
                  {"tp_comm_overlap", &p->tp_comm_overlap},
                  {"ep_comm_overlap", &p->ep_comm_overlap},
                  {"expandable_segments", &p->expandable_segments},
                  {"cuda_graphs", &p->cuda_graphs},
                  {"memory_tight", &p->memory_tight}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
    if (strcmp(item, counts[i].name) != 0) continue;
    char* end = NULL;
    const long n = strtol(value, &end, 10);
    if (!*value || *end || n < 1 || n > 4096) {
      set_err(err, errlen, "%s=\"%s\" in \"%s\" is not a count from 1 to 4096 (e.g. %s=2)", item,
              value, text, item);
      return -1;
    }
    *counts[i].field = (int)n;
    return 0;
  }
  for (size_t i = 0; i < sizeof switches / sizeof switches[0]; ++i) {
    if (strcmp(item, switches[i].name) != 0) continue;
    if (parse_switch(value, switches[i].field) != 0) {
      set_err(err, errlen, "%s=\"%s\" in \"%s\" is not on or off (give %s, or %s=off)", item, value,
              text, item, item);
      return -1;
    }
    return 0;
  }
  if (strcmp(item, "sharding") == 0) {
    static const char* const modes[] = {"no_shard", "optim", "optim_grads", "optim_grads_params"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; ++i)
      if (strcmp(value, modes[i]) == 0) {
        snprintf(p->sharding, sizeof p->sharding, "%s", value);
        return 0;
      }
    set_err(err, errlen,
            "sharding=\"%s\" in \"%s\" is not one of no_shard, optim, optim_grads, "
            "optim_grads_params",
            value, text);
    return -1;
  }
  set_err(err, errlen, "unknown key \"%s\" in \"%s\"; keys: " KEYS, item, text);
  return -1;
}

int muster_policy_parse(const char* text, struct muster_policy* p, char* err, size_t errlen) {
  memset(p, 0, sizeof *p);
  p->nccl_ub = p->fsdp_double_buffer = p->tp_comm_overlap = p->ep_comm_overlap =
      p->expandable_segments = p->cuda_graphs = p->memory_tight = -1;
  if (!text) return 0;
  char* copy = strdup(text);
  if (!copy) return set_err(err, errlen, "out of memory"), -1;
  int rc = 0;
  char* save = NULL;
  for (char* item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save))
    rc = parse_item(item, p, text, err, errlen);
  free(copy);
  return rc;
}

/* ---- the request ---- */

struct buffer {
  char* data;
  size_t len, cap;
  int failed;
};

static void append(struct buffer* b, const char* s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 512;
    while (b->len + n + 1 > cap) cap *= 2;
    char* data = realloc(b->data, cap);
    if (!data) {
      b->failed = 1;
      return;
    }
    b->data = data;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void text(struct buffer* b, const char* s) {
  append(b, s, strlen(s));
}

/* A JSON string of s[0, n). Bytes >= 0x80 pass through (the daemon checks UTF-8). */
static void quoted(struct buffer* b, const char* s, size_t n) {
  append(b, "\"", 1);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      append(b, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      append(b, esc, 6);
    } else {
      append(b, (const char*)&s[i], 1);
    }
  }
  append(b, "\"", 1);
}

static void field_int(struct buffer* b, const char* name, int value) {
  char num[32];
  snprintf(num, sizeof num, ",\"%s\":%d", name, value);
  text(b, num);
}

int muster_env_sent(const char* entry) {
  static const char* const prefixes[] = {"CUDA_", "NCCL_", "PYTORCH_", "TORCH_NCCL_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; ++i)
    if (strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0) return strchr(entry, '=') != NULL;
  return 0;
}

char* muster_env_request(const char* job_id, const char* step_id, const struct muster_policy* p,
                         int gpus, char* const* env) {
  struct buffer b = {0};
  text(&b, "{\"version\":1,\"request\":\"env\",\"job\":{\"features\":{");
  const struct {
    const char* name;
    int value;
  } features[] = {{"nccl_ub", p->nccl_ub},
                  {"fsdp_double_buffer", p->fsdp_double_buffer},
                  {"tp_comm_overlap", p->tp_comm_overlap},
                  {"ep_comm_overlap", p->ep_comm_overlap},
                  {"expandable_segments", p->expandable_segments},
                  {"cuda_graphs", p->cuda_graphs}};
  int first = 1;
  for (size_t i = 0; i < sizeof features / sizeof features[0]; ++i) {
    if (features[i].value < 0) continue;
    text(&b, first ? "\"" : ",\"");
    text(&b, features[i].name);
    text(&b, features[i].value ? "\":true" : "\":false");
    first = 0;
  }
  text(&b, "}");
  if (job_id) {
    text(&b, ",\"id\":");
    quoted(&b, job_id, strlen(job_id));
    if (step_id) {
      text(&b, ",\"step\":");
      quoted(&b, step_id, strlen(step_id));
    }
  }
  if (p->tp) field_int(&b, "tp", p->tp);
  if (p->cp) field_int(&b, "cp", p->cp);
  if (p->ep) field_int(&b, "ep", p->ep);
  if (gpus >= 0) field_int(&b, "gpus", gpus);
  if (p->sharding[0]) {
    text(&b, ",\"sharding\":");
    quoted(&b, p->sharding, strlen(p->sharding));
  }
  if (p->memory_tight >= 0)
    text(&b, p->memory_tight ? ",\"memory_tight\":true" : ",\"memory_tight\":false");
  text(&b, "},\"env\":{");
  first = 1;
  for (char* const* e = env; e && *e; ++e) {
    if (!muster_env_sent(*e)) continue;
    const char* eq = strchr(*e, '=');
    if (!first) text(&b, ",");
    quoted(&b, *e, (size_t)(eq - *e));
    text(&b, ":");
    quoted(&b, eq + 1, strlen(eq + 1));
    first = 0;
  }
  text(&b, "}}\n");
  if (b.failed) {
    free(b.data);
    return NULL;
  }
  return b.data;
}

int muster_visible_gpus(const char* value) {
  int n = 0;
  if (!value || strcmp(value, "NoDevFiles") == 0) return 0;
  for (const char* s = value; *s;) {
    const char* comma = strchr(s, ',');
    const size_t len = comma ? (size_t)(comma - s) : strlen(s);
    n += len > 0;
    s += len + (comma != NULL);
  }
  return n;
}

/* ---- the reply ---- */

static char* dup_or_null(const char* s) {
  return s ? strdup(s) : NULL;
}

static int add_changes(const struct muster_json* list, int with_value, struct muster_env_reply* out,
                       char* err, size_t errlen) {
  const char* key = with_value ? "set" : "unset";
  if (!list || list->type != MUSTER_JSON_ARRAY)
    return set_err(err, errlen, "the reply has no \"%s\" list", key), -1;
  struct muster_env_change* grown =
      realloc(out->changes, (out->num_changes + list->count + 1) * sizeof *grown);
  if (!grown) return set_err(err, errlen, "out of memory"), -1;
  out->changes = grown;
  for (size_t i = 0; i < list->count; ++i) {
    const char* variable = muster_json_get_string(&list->items[i], "variable");
    const char* value = muster_json_get_string(&list->items[i], "value");
    const char* rule = muster_json_get_string(&list->items[i], "rule");
    if (!variable || !rule || (with_value && !value))
      return set_err(err, errlen, "item %zu of \"%s\" lacks variable, rule%s", i, key,
                     with_value ? " or value" : ""),
             -1;
    struct muster_env_change* c = &out->changes[out->num_changes++];
    c->variable = strdup(variable);
    c->value = with_value ? strdup(value) : NULL;
    c->rule = strdup(rule);
    if (!c->variable || !c->rule || (with_value && !c->value))
      return set_err(err, errlen, "out of memory"), -1;
  }
  return 0;
}

int muster_env_reply_parse(const char* line, size_t len, struct muster_env_reply* out, char* err,
                           size_t errlen) {
  struct muster_json doc;
  char why[160];
  memset(out, 0, sizeof *out);
  if (muster_json_parse(line, len, &doc, why, sizeof why) != 0)
    return set_err(err, errlen, "the reply is not JSON (%s)", why), -1;
  int rc = 0;
  const struct muster_json* ok = muster_json_get(&doc, "ok");
  if (!ok || ok->type != MUSTER_JSON_BOOL) {
    rc = -1;
    set_err(err, errlen, "the reply has no \"ok\"");
  } else if (!ok->boolean) {
    const struct muster_json* e = muster_json_get(&doc, "error");
    out->error_code = dup_or_null(muster_json_get_string(e, "code"));
    out->error_message = dup_or_null(muster_json_get_string(e, "message"));
    if (!out->error_code || !out->error_message) {
      rc = -1;
      set_err(err, errlen, "an error reply without its code and message");
    }
  } else {
    out->ok = 1;
    rc = add_changes(muster_json_get(&doc, "set"), 1, out, err, errlen);
    if (rc == 0) rc = add_changes(muster_json_get(&doc, "unset"), 0, out, err, errlen);
    const struct muster_json* errors = muster_json_get(&doc, "errors");
    if (rc == 0 && (!errors || errors->type != MUSTER_JSON_ARRAY)) {
      rc = -1;
      set_err(err, errlen, "the reply has no \"errors\" list");
    }
    for (size_t i = 0; rc == 0 && i < errors->count; ++i) {
      const char* rule = muster_json_get_string(&errors->items[i], "rule");
      const char* message = muster_json_get_string(&errors->items[i], "message");
      char** grown = realloc(out->errors, (out->num_errors + 1) * sizeof *grown);
      if (!grown || !rule || !message) {
        if (grown) out->errors = grown;
        rc = -1;
        set_err(err, errlen, "item %zu of \"errors\" lacks rule or message", i);
        break;
      }
      out->errors = grown;
      const size_t n = strlen(rule) + strlen(message) + 3;
      out->errors[out->num_errors] = malloc(n);
      if (!out->errors[out->num_errors]) {
        rc = -1;
        set_err(err, errlen, "out of memory");
        break;
      }
      snprintf(out->errors[out->num_errors], n, "%s: %s", rule, message);
      ++out->num_errors;
    }
  }
  muster_json_free(&doc);
  return rc;
}

void muster_env_reply_free(struct muster_env_reply* reply) {
  for (size_t i = 0; i < reply->num_changes; ++i) {
    free(reply->changes[i].variable);
    free(reply->changes[i].value);
    free(reply->changes[i].rule);
  }
  for (size_t i = 0; i < reply->num_errors; ++i) free(reply->errors[i]);
  free(reply->changes);
  free(reply->errors);
  free(reply->error_code);
  free(reply->error_message);
  memset(reply, 0, sizeof *reply);
}
