/* Numeric settings from the environment, parsed one way everywhere.
 *
 * A value is an optional sign and decimal digits, with blanks around it
 * allowed; a size may end in a binary unit (K, M, G, T, optionally followed
 * by "i" and/or "B": "512M", "64KiB", "16GB", or a plain "B"). Anything
 * else (not a number, trailing characters, a value outside [min, max],
 * an overflow) is HPU_ERROR_INVALID_ARGUMENT with a message naming the
 * variable, the value as given and the allowed range: never a silent
 * fallback to the default. An unset or empty (blank) variable gives the
 * default. */
#ifndef HPU_ENV_H
#define HPU_ENV_H

#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses `text` as an integer in [min, max]; `name` is how the message
 * calls it (the variable, or e.g. "max MB of PT_HPU_RECIPE_CACHE_CONFIG"). */
hpu_status_t hpu_parse_int(const char *name, const char *text, long long min, long long max,
                           long long *out);
/* The same for a size in bytes with an optional unit suffix. */
hpu_status_t hpu_parse_size(const char *name, const char *text, unsigned long long min,
                            unsigned long long max, unsigned long long *out);
/* A finite decimal number (strtod syntax, no hex, no inf/nan) in [min, max]. */
hpu_status_t hpu_parse_double(const char *name, const char *text, double min, double max,
                              double *out);

/* getenv(name), then the parsers above; def when unset or blank (def is
 * not checked against the range). */
hpu_status_t hpu_env_int(const char *name, long long def, long long min, long long max,
                         long long *out);
hpu_status_t hpu_env_size(const char *name, unsigned long long def, unsigned long long min,
                          unsigned long long max, unsigned long long *out);
hpu_status_t hpu_env_double(const char *name, double def, double min, double max, double *out);

#ifdef __cplusplus
}
#endif
#endif
