/* muster_config: see muster_config.h. */
#include "muster_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int number(const char* value, long low, long high, int* out) {
  char* end = NULL;
  const long n = strtol(value, &end, 10);
  if (!*value || *end || n < low || n > high) return -1;
  *out = (int)n;
  return 0;
}

int muster_config_parse(int argc, char** argv, struct muster_config* out, char* err,
                        size_t errlen) {
  snprintf(out->socket, sizeof out->socket, "%s", MUSTER_DEFAULT_SOCKET);
  out->timeout_ms = 1000;
  out->record_timeout_ms = 4000;
  out->required = 0;
  for (int i = 0; i < argc; ++i) {
    const char* arg = argv[i];
    const char* eq = strchr(arg, '=');
    const size_t key_len = eq ? (size_t)(eq - arg) : strlen(arg);
    const char* value = eq ? eq + 1 : "";
#define KEY_IS(k) (key_len == strlen(k) && strncmp(arg, k, key_len) == 0)
    if (KEY_IS("socket")) {
      if (value[0] != '/' || strlen(value) >= sizeof out->socket) {
        snprintf(err, errlen,
                 "socket: invalid value: \"%s\" (an absolute path under %zu bytes, e.g. "
                 "socket=" MUSTER_DEFAULT_SOCKET ")",
                 value, sizeof out->socket);
        return -1;
      }
      snprintf(out->socket, sizeof out->socket, "%s", value);
    } else if (KEY_IS("timeout_ms")) {
      if (number(value, 1, 60000, &out->timeout_ms) != 0) {
        snprintf(err, errlen,
                 "timeout_ms: invalid value: \"%s\" (1 to 60000, e.g. timeout_ms=1000)", value);
        return -1;
      }
    } else if (KEY_IS("record_timeout_ms")) {
      if (number(value, 0, 60000, &out->record_timeout_ms) != 0) {
        snprintf(err, errlen,
                 "record_timeout_ms: invalid value: \"%s\" (0 to 60000, e.g. "
                 "record_timeout_ms=4000; 0: no record)",
                 value);
        return -1;
      }
    } else if (KEY_IS("required")) {
      if (number(eq ? value : "1", 0, 1, &out->required) != 0) {
        snprintf(err, errlen, "required: invalid value: \"%s\" (0 or 1)", value);
        return -1;
      }
    } else {
      snprintf(err, errlen,
               "unknown argument \"%s\" in plugstack.conf; known: socket=, "
               "timeout_ms=, record_timeout_ms=, required=",
               arg);
      return -1;
    }
#undef KEY_IS
  }
  return 0;
}
