/* Named process-wide counters (cpu fallbacks per op, later graph compiles,
 * cache hits ...), readable from Python. Thread-safe. */
#ifndef HPU_METRICS_H
#define HPU_METRICS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HPU_METRIC_NAME_MAX 128

/* Adds delta to the counter `name` (created at 0 on first use). Names longer
 * than HPU_METRIC_NAME_MAX-1 are truncated. */
void hpu_metric_add(const char *name, int64_t delta);
int64_t hpu_metric_get(const char *name);
/* Number of counters whose name starts with prefix. */
size_t hpu_metric_count(const char *prefix);
/* Copies the i-th counter whose name starts with prefix (0 <= i < count)
 * into name (HPU_METRIC_NAME_MAX bytes) and *value; returns 0 when out of
 * range. Iteration order is creation order. */
int hpu_metric_at(const char *prefix, size_t i, char name[HPU_METRIC_NAME_MAX], int64_t *value);
/* Resets every counter whose name starts with prefix to 0 ("" = all). */
void hpu_metric_reset(const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
