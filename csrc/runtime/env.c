/* The one parser of numeric environment settings (hpu/env.h). Every error
 * names the setting, quotes its value and gives the allowed range, so that
 * a typo in a launch script is reported where it is, not turned into a
 * default, a wrapped-around size or an endless loop. */
#include "hpu/env.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The value without surrounding blanks, in buf; 0 when it does not fit. */
static int trimmed(const char *text, char *buf, size_t len) {
  while (isspace((unsigned char)*text)) text++;
  size_t n = strlen(text);
  while (n > 0 && isspace((unsigned char)text[n - 1])) n--;
  if (n >= len) return 0;
  memcpy(buf, text, n);
  buf[n] = 0;
  return 1;
}

static hpu_status_t bad_int(const char *name, const char *text, const char *why, long long min,
                            long long max) {
  return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                   "invalid %s='%.200s': %s; expected an integer from %lld to %lld", name, text,
                   why, min, max);
}

hpu_status_t hpu_parse_int(const char *name, const char *text, long long min, long long max,
                           long long *out) {
  char s[64];
  if (!trimmed(text, s, sizeof s)) return bad_int(name, text, "too long", min, max);
  const char *d = s + (*s == '-' || *s == '+');
  if (!isdigit((unsigned char)*d)) return bad_int(name, text, "not an integer", min, max);
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end) return bad_int(name, text, "trailing characters after the number", min, max);
  if (errno == ERANGE || v < min || v > max)
    return bad_int(name, text, v < 0 && min >= 0 ? "negative" : "out of range", min, max);
  *out = v;
  return HPU_SUCCESS;
}

static hpu_status_t bad_size(const char *name, const char *text, const char *why,
                             unsigned long long min, unsigned long long max) {
  return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                   "invalid %s='%.200s': %s; expected a size from %llu to %llu bytes, optionally "
                   "with a K, M, G or T suffix (e.g. 512M)",
                   name, text, why, min, max);
}

hpu_status_t hpu_parse_size(const char *name, const char *text, unsigned long long min,
                            unsigned long long max, unsigned long long *out) {
  char s[64];
  if (!trimmed(text, s, sizeof s)) return bad_size(name, text, "too long", min, max);
  if (*s == '-') return bad_size(name, text, "negative", min, max);
  const char *d = s + (*s == '+');
  if (!isdigit((unsigned char)*d)) return bad_size(name, text, "not a number", min, max);
  char *end;
  errno = 0;
  unsigned long long n = strtoull(d, &end, 10);
  int overflow = errno == ERANGE;
  unsigned shift = 0;
  const char *u = end;
  if (*u) {
    switch (toupper((unsigned char)*u)) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'B': u--; break; /* a plain "B" */
      default: return bad_size(name, text, "unknown unit", min, max);
    }
    u++;
    if (shift && (*u == 'i' || *u == 'I')) u++;
    if (*u == 'b' || *u == 'B') u++;
    if (*u) return bad_size(name, text, "trailing characters after the unit", min, max);
  }
  if (overflow || n > (ULLONG_MAX >> shift)) return bad_size(name, text, "out of range", min, max);
  n <<= shift;
  if (n < min || n > max) return bad_size(name, text, "out of range", min, max);
  *out = n;
  return HPU_SUCCESS;
}

hpu_status_t hpu_parse_double(const char *name, const char *text, double min, double max,
                              double *out) {
  char s[64];
  int ok = trimmed(text, s, sizeof s) && *s;
  /* Plain decimal only: strtod would also take hex, "inf" and "nan". */
  for (const char *p = s; ok && *p; p++)
    ok = isdigit((unsigned char)*p) || strchr("+-.eE", *p);
  char *end = s;
  errno = 0;
  double v = ok ? strtod(s, &end) : 0;
  if (!ok || end == s || *end || errno == ERANGE || !isfinite(v) || v < min || v > max)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "invalid %s='%.200s': expected a number from %g to %g", name, text, min, max);
  *out = v;
  return HPU_SUCCESS;
}

/* Unset, or nothing but blanks. */
static const char *value_of(const char *name) {
  const char *v = getenv(name);
  if (!v) return NULL;
  for (const char *p = v; *p; p++)
    if (!isspace((unsigned char)*p)) return v;
  return NULL;
}

hpu_status_t hpu_env_int(const char *name, long long def, long long min, long long max,
                         long long *out) {
  const char *v = value_of(name);
  if (!v) {
    *out = def;
    return HPU_SUCCESS;
  }
  return hpu_parse_int(name, v, min, max, out);
}

hpu_status_t hpu_env_size(const char *name, unsigned long long def, unsigned long long min,
                          unsigned long long max, unsigned long long *out) {
  const char *v = value_of(name);
  if (!v) {
    *out = def;
    return HPU_SUCCESS;
  }
  return hpu_parse_size(name, v, min, max, out);
}

hpu_status_t hpu_env_double(const char *name, double def, double min, double max, double *out) {
  const char *v = value_of(name);
  if (!v) {
    *out = def;
    return HPU_SUCCESS;
  }
  return hpu_parse_double(name, v, min, max, out);
}
