/* muster_json: see muster_json.h. */
#include "muster_json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
  const char* text;
  size_t len, at;
  char* err;
  size_t errlen;
};

static int fail(struct reader* r, const char* what, ...) {
  char msg[160];
  va_list args;
  va_start(args, what);
  vsnprintf(msg, sizeof msg, what, args);
  va_end(args);
  if (r->errlen) snprintf(r->err, r->errlen, "at byte %zu: %s", r->at, msg);
  return -1;
}

static void skip_space(struct reader* r) {
  while (r->at < r->len && (r->text[r->at] == ' ' || r->text[r->at] == '\t' ||
                            r->text[r->at] == '\n' || r->text[r->at] == '\r'))
    ++r->at;
}

static int literal(struct reader* r, const char* word) {
  const size_t n = strlen(word);
  if (r->len - r->at < n || memcmp(r->text + r->at, word, n) != 0)
    return fail(r, "expected %s", word);
  r->at += n;
  return 0;
}

static int hex4(struct reader* r, unsigned* out) {
  unsigned v = 0;
  if (r->len - r->at < 4) return fail(r, "expected 4 hex digits after \\u");
  for (int i = 0; i < 4; ++i) {
    const char c = r->text[r->at++];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return fail(r, "expected a hex digit after \\u");
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char* out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string at r->at (its opening quote); *out is malloc'd. Decoded text is never longer than
 * the source text, so one allocation of the source length is enough. */
static int string(struct reader* r, char** out) {
  ++r->at; /* the quote */
  const size_t start = r->at;
  char* s = malloc(r->len - start + 1);
  size_t n = 0;
  if (!s) return fail(r, "out of memory");
  while (1) {
    if (r->at >= r->len) {
      free(s);
      return fail(r, "unterminated string (opened at byte %zu)", start - 1);
    }
    const unsigned char c = (unsigned char)r->text[r->at++];
    if (c == '"') break;
    if (c < 0x20) {
      free(s);
      return fail(r, "control character 0x%02x in a string", c);
    }
    if (c != '\\') {
      s[n++] = (char)c;
      continue;
    }
    if (r->at >= r->len) {
      free(s);
      return fail(r, "unterminated escape");
    }
    const char e = r->text[r->at++];
    unsigned cp = 0;
    switch (e) {
      case '"':
        s[n++] = '"';
        break;
      case '\\':
        s[n++] = '\\';
        break;
      case '/':
        s[n++] = '/';
        break;
      case 'b':
        s[n++] = '\b';
        break;
      case 'f':
        s[n++] = '\f';
        break;
      case 'n':
        s[n++] = '\n';
        break;
      case 'r':
        s[n++] = '\r';
        break;
      case 't':
        s[n++] = '\t';
        break;
      case 'u':
        if (hex4(r, &cp) != 0) {
          free(s);
          return -1;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          unsigned low = 0;
          if (r->len - r->at < 2 || r->text[r->at] != '\\' || r->text[r->at + 1] != 'u') {
            free(s);
            return fail(r, "a high surrogate \\u%04X without its low half", cp);
          }
          r->at += 2;
          if (hex4(r, &low) != 0) {
            free(s);
            return -1;
          }
          if (low < 0xDC00 || low > 0xDFFF) {
            free(s);
            return fail(r, "\\u%04X is not a low surrogate", low);
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          free(s);
          return fail(r, "a low surrogate \\u%04X without its high half", cp);
        } else if (cp == 0) {
          free(s);
          return fail(r, "\\u0000 in a string");
        }
        n += put_utf8(s + n, cp); /* at most 4 bytes from at least 6 of source */
        break;
      default:
        free(s);
        return fail(r, "unknown escape \\%c", e);
    }
  }
  s[n] = '\0';
  *out = s;
  return 0;
}

static int number(struct reader* r, double* out) {
  /* JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
  size_t i = r->at;
  const char* t = r->text;
  if (i < r->len && t[i] == '-') ++i;
  if (i < r->len && t[i] == '0') {
    ++i;
  } else if (i < r->len && t[i] >= '1' && t[i] <= '9') {
    while (i < r->len && t[i] >= '0' && t[i] <= '9') ++i;
  } else {
    return fail(r, "expected a value");
  }
  if (i < r->len && t[i] == '.') {
    const size_t digits = ++i;
    while (i < r->len && t[i] >= '0' && t[i] <= '9') ++i;
    if (i == digits) return fail(r, "expected a digit after '.'");
  }
  if (i < r->len && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < r->len && (t[i] == '+' || t[i] == '-')) ++i;
    const size_t digits = i;
    while (i < r->len && t[i] >= '0' && t[i] <= '9') ++i;
    if (i == digits) return fail(r, "expected a digit in the exponent");
  }
  char buf[64];
  if (i - r->at >= sizeof buf) return fail(r, "number too long");
  memcpy(buf, t + r->at, i - r->at);
  buf[i - r->at] = '\0';
  *out = strtod(buf, NULL);
  r->at = i;
  return 0;
}

static int value(struct reader* r, struct muster_json* out, int depth);

/* Appends a parsed item (and key) to a growing ARRAY/OBJECT. */
static int push(struct reader* r, struct muster_json* parent, size_t* cap, char* key) {
  if (parent->count == *cap) {
    const size_t grown = *cap ? *cap * 2 : 4;
    struct muster_json* items = realloc(parent->items, grown * sizeof *items);
    if (!items) return fail(r, "out of memory");
    parent->items = items;
    if (parent->type == MUSTER_JSON_OBJECT) {
      char** keys = realloc(parent->keys, grown * sizeof *keys);
      if (!keys) return fail(r, "out of memory");
      parent->keys = keys;
    }
    *cap = grown;
  }
  memset(&parent->items[parent->count], 0, sizeof parent->items[0]);
  if (parent->type == MUSTER_JSON_OBJECT) parent->keys[parent->count] = key;
  ++parent->count;
  return 0;
}

static int container(struct reader* r, struct muster_json* out, int depth) {
  const int is_object = r->text[r->at] == '{';
  const char close = is_object ? '}' : ']';
  size_t cap = 0;
  out->type = is_object ? MUSTER_JSON_OBJECT : MUSTER_JSON_ARRAY;
  ++r->at;
  skip_space(r);
  if (r->at < r->len && r->text[r->at] == close) {
    ++r->at;
    return 0;
  }
  while (1) {
    char* key = NULL;
    skip_space(r);
    if (is_object) {
      if (r->at >= r->len || r->text[r->at] != '"') return fail(r, "expected a key string");
      if (string(r, &key) != 0) return -1;
      skip_space(r);
      if (r->at >= r->len || r->text[r->at] != ':') {
        free(key);
        return fail(r, "expected ':' after a key");
      }
      ++r->at;
    }
    if (push(r, out, &cap, key) != 0) {
      free(key);
      return -1;
    }
    if (value(r, &out->items[out->count - 1], depth + 1) != 0) return -1;
    skip_space(r);
    if (r->at < r->len && r->text[r->at] == ',') {
      ++r->at;
      continue;
    }
    if (r->at < r->len && r->text[r->at] == close) {
      ++r->at;
      return 0;
    }
    return fail(r, "expected ',' or '%c'", close);
  }
}

static int value(struct reader* r, struct muster_json* out, int depth) {
  if (depth > MUSTER_JSON_MAX_DEPTH) return fail(r, "nested deeper than %d", MUSTER_JSON_MAX_DEPTH);
  skip_space(r);
  if (r->at >= r->len) return fail(r, "expected a value, found the end");
  switch (r->text[r->at]) {
    case '{':
    case '[':
      return container(r, out, depth);
    case '"':
      out->type = MUSTER_JSON_STRING;
      return string(r, &out->string);
    case 't':
      out->type = MUSTER_JSON_BOOL;
      out->boolean = 1;
      return literal(r, "true");
    case 'f':
      out->type = MUSTER_JSON_BOOL;
      return literal(r, "false");
    case 'n':
      out->type = MUSTER_JSON_NULL;
      return literal(r, "null");
    default:
      out->type = MUSTER_JSON_NUMBER;
      return number(r, &out->number);
  }
}

int muster_json_parse(const char* text, size_t len, struct muster_json* out, char* err,
                      size_t errlen) {
  struct reader r = {text, len, 0, err, errlen};
  memset(out, 0, sizeof *out);
  if (errlen) err[0] = '\0';
  int rc = value(&r, out, 0);
  if (rc == 0) {
    skip_space(&r);
    if (r.at != r.len) rc = fail(&r, "text after the value");
  }
  if (rc != 0) muster_json_free(out);
  return rc;
}

void muster_json_free(struct muster_json* v) {
  if (!v) return;
  for (size_t i = 0; i < v->count; ++i) {
    muster_json_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->string);
  memset(v, 0, sizeof *v);
}

const struct muster_json* muster_json_get(const struct muster_json* object, const char* key) {
  if (!object || object->type != MUSTER_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->count; ++i)
    if (strcmp(object->keys[i], key) == 0) return &object->items[i];
  return NULL;
}

const char* muster_json_get_string(const struct muster_json* object, const char* key) {
  const struct muster_json* v = muster_json_get(object, key);
  return v && v->type == MUSTER_JSON_STRING ? v->string : NULL;
}
