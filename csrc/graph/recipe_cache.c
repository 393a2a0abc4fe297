/* LRU recipe cache: signature -> compiled plan (fused elementwise groups,
 * intermediates kept out of memory). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "graph/recipe_cache.h"
#include "hpu/lazy.h"
#include "hpu/metrics.h"
#include "runtime/lock.h"

typedef struct entry {
  hpu_signature_t sig;
  hpu_plan_t *plan;
  struct entry *lru_prev, *lru_next; /* most recent at head */
  struct entry *chain;
} entry_t;

#define NBUCKETS 4096

static hpu_mutex_t mu = HPU_MUTEX_INIT(HPU_RANK_RECIPE, "recipe cache");
static entry_t *buckets[NBUCKETS];
static entry_t *lru_head, *lru_tail;
static size_t count, capacity;

static size_t cache_capacity(void) {
  if (!capacity) {
    const char *v = getenv("PT_HPU_RECIPE_CACHE_SIZE");
    long n = v ? strtol(v, NULL, 10) : 0;
    capacity = n > 0 ? (size_t)n : 1024;
  }
  return capacity;
}

static void lru_unlink(entry_t *e) {
  if (e->lru_prev) e->lru_prev->lru_next = e->lru_next; else lru_head = e->lru_next;
  if (e->lru_next) e->lru_next->lru_prev = e->lru_prev; else lru_tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(entry_t *e) {
  e->lru_next = lru_head;
  e->lru_prev = NULL;
  if (lru_head) lru_head->lru_prev = e;
  lru_head = e;
  if (!lru_tail) lru_tail = e;
}

static void remove_entry(entry_t *e) {
  entry_t **pp = &buckets[e->sig.hash % NBUCKETS];
  while (*pp && *pp != e) pp = &(*pp)->chain;
  if (*pp) *pp = e->chain;
  lru_unlink(e);
  hpu_signature_free(&e->sig);
  hpu_plan_free(e->plan);
  free(e);
  count--;
}

int hpu_recipe_cache_lookup(const hpu_signature_t *sig, hpu_plan_t **plan) {
  *plan = NULL;
  hpu_mutex_lock(&mu);
  for (entry_t *e = buckets[sig->hash % NBUCKETS]; e; e = e->chain) {
    if (hpu_signature_equal(&e->sig, sig)) {
      lru_unlink(e);
      lru_push_front(e);
      if (e->plan) *plan = hpu_plan_copy(e->plan);
      hpu_mutex_unlock(&mu);
      return 1;
    }
  }
  hpu_mutex_unlock(&mu);
  return 0;
}

void hpu_recipe_cache_insert(hpu_signature_t *sig, hpu_plan_t *plan) {
  entry_t *e = calloc(1, sizeof *e);
  if (!e) {
    hpu_signature_free(sig);
    hpu_plan_free(plan);
    return;
  }
  e->sig = *sig;
  e->plan = plan;
  memset(sig, 0, sizeof *sig);
  hpu_mutex_lock(&mu);
  e->chain = buckets[e->sig.hash % NBUCKETS];
  buckets[e->sig.hash % NBUCKETS] = e;
  lru_push_front(e);
  count++;
  while (count > cache_capacity() && lru_tail && lru_tail != e) {
    remove_entry(lru_tail);
    hpu_metric_add("recipe_cache_evict", 1);
  }
  hpu_mutex_unlock(&mu);
}

size_t hpu_recipe_cache_size(void) {
  hpu_mutex_lock(&mu);
  size_t n = count;
  hpu_mutex_unlock(&mu);
  return n;
}

void hpu_recipe_cache_clear(void) {
  hpu_mutex_lock(&mu);
  while (lru_head) remove_entry(lru_head);
  hpu_mutex_unlock(&mu);
}
