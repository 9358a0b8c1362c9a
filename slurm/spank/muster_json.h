/* muster_json: a small JSON reader for the SPANK plugin's replies from musterd (C has none, and
 * a plugin loaded into slurmd and srun must not pull in a C++ runtime).
 *
 * Accepted grammar: RFC 8259 JSON text, one value with whitespace around it, nesting at most
 * MUSTER_JSON_MAX_DEPTH deep. Strings are decoded to UTF-8 (\uXXXX and surrogate pairs
 * included; an escaped NUL is refused, so every decoded string is a C string). Numbers are read
 * with strtod.
 * On failure the result is -1, *out is left empty (nothing to free) and `err` holds one line
 * naming the byte offset and what was expected. On success the caller owns *out and frees it
 * with muster_json_free. */
#ifndef MUSTER_JSON_H
#define MUSTER_JSON_H

#include <stddef.h>

#define MUSTER_JSON_MAX_DEPTH 32

enum muster_json_type {
  MUSTER_JSON_NULL,
  MUSTER_JSON_BOOL,
  MUSTER_JSON_NUMBER,
  MUSTER_JSON_STRING,
  MUSTER_JSON_ARRAY,
  MUSTER_JSON_OBJECT
};

struct muster_json {
  enum muster_json_type type;
  int boolean;               /* BOOL */
  double number;             /* NUMBER */
  char* string;              /* STRING: decoded, NUL-terminated */
  size_t count;              /* ARRAY, OBJECT: number of items */
  struct muster_json* items; /* ARRAY, OBJECT: the values */
  char** keys;               /* OBJECT: items[i]'s key */
};

/* Parses text[0, len). Returns 0, or -1 with `err` (errlen bytes, always terminated) set. */
int muster_json_parse(const char* text, size_t len, struct muster_json* out, char* err,
                      size_t errlen);

/* Frees what muster_json_parse allocated inside `value` (not `value` itself); leaves it NULL. */
void muster_json_free(struct muster_json* value);

/* The value of `key` in an OBJECT (the first, if repeated), or NULL when there is none or
 * `object` is NULL or not an object. */
const struct muster_json* muster_json_get(const struct muster_json* object, const char* key);

/* The string of `key` in an OBJECT, or NULL when it is missing or not a string. */
const char* muster_json_get_string(const struct muster_json* object, const char* key);

#endif
