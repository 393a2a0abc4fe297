/* Named counters. A flat array searched linearly: there are tens of names,
 * and the hot callers (fallbacks) are far slower than the search. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/metrics.h"
#include "hpu/status_page.h"
#include "runtime/lock.h"

typedef struct metric {
  char name[HPU_METRIC_NAME_MAX];
  int64_t value;
} metric_t;

static hpu_mutex_t metrics_lock = HPU_MUTEX_INIT(HPU_RANK_LEAF, "metrics");
static metric_t *metrics;
static size_t metrics_len, metrics_cap;

static metric_t *find_locked(const char *name, int create) {
  for (size_t i = 0; i < metrics_len; i++)
    if (strncmp(metrics[i].name, name, HPU_METRIC_NAME_MAX - 1) == 0) return &metrics[i];
  if (!create) return NULL;
  if (metrics_len == metrics_cap) {
    size_t cap = metrics_cap ? metrics_cap * 2 : 64;
    metric_t *grown = realloc(metrics, cap * sizeof *grown);
    if (!grown) return NULL; /* counting is best effort; never fail the op */
    metrics = grown;
    metrics_cap = cap;
  }
  metric_t *m = &metrics[metrics_len++];
  strncpy(m->name, name, HPU_METRIC_NAME_MAX - 1);
  m->name[HPU_METRIC_NAME_MAX - 1] = '\0';
  m->value = 0;
  return m;
}

void hpu_metric_add(const char *name, int64_t delta) {
  hpu_mutex_lock(&metrics_lock);
  metric_t *m = find_locked(name, 1);
  if (m) m->value += delta;
  hpu_status_page_metric(name, delta); /* under the lock: it serialises the page's op slots */
  hpu_mutex_unlock(&metrics_lock);
}

int64_t hpu_metric_get(const char *name) {
  hpu_mutex_lock(&metrics_lock);
  metric_t *m = find_locked(name, 0);
  int64_t v = m ? m->value : 0;
  hpu_mutex_unlock(&metrics_lock);
  return v;
}

static int has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

size_t hpu_metric_count(const char *prefix) {
  size_t n = 0;
  hpu_mutex_lock(&metrics_lock);
  for (size_t i = 0; i < metrics_len; i++) n += has_prefix(metrics[i].name, prefix);
  hpu_mutex_unlock(&metrics_lock);
  return n;
}

int hpu_metric_at(const char *prefix, size_t index, char name[HPU_METRIC_NAME_MAX], int64_t *value) {
  int found = 0;
  hpu_mutex_lock(&metrics_lock);
  for (size_t i = 0, k = 0; i < metrics_len; i++) {
    if (!has_prefix(metrics[i].name, prefix)) continue;
    if (k++ == index) {
      memcpy(name, metrics[i].name, HPU_METRIC_NAME_MAX);
      *value = metrics[i].value;
      found = 1;
      break;
    }
  }
  hpu_mutex_unlock(&metrics_lock);
  return found;
}

void hpu_metric_reset(const char *prefix) {
  hpu_mutex_lock(&metrics_lock);
  for (size_t i = 0; i < metrics_len; i++)
    if (has_prefix(metrics[i].name, prefix)) metrics[i].value = 0;
  hpu_mutex_unlock(&metrics_lock);
}
