/* LRU recipe cache: signature -> compiled plan (fused elementwise groups,
 * intermediates kept out of memory).
 *
 * Bounded twice, evicting the least recently used: by recipes
 * (PT_HPU_RECIPE_CACHE_SIZE, 1024) and by host bytes
 * (PT_HPU_RECIPE_CACHE_BYTES, 256 MiB): a step's graph of a few thousand
 * nodes has a signature of hundreds of KB, so 1024 recipes alone could hold
 * a gigabyte. A recipe larger than the byte bound by itself is not kept. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "graph/recipe_cache.h"
#include "hpu/env.h"
#include "hpu/lazy.h"
#include "hpu/metrics.h"
#include "runtime/lock.h"

typedef struct entry {
  hpu_signature_t sig;
  hpu_plan_t *plan;
  size_t bytes;                      /* host memory it holds (entry_bytes) */
  struct entry *lru_prev, *lru_next; /* most recent at head */
  struct entry *chain;
} entry_t;

#define NBUCKETS 4096
#define DEFAULT_ENTRIES 1024
#define DEFAULT_BYTES ((size_t)256 << 20)

static hpu_mutex_t mu = HPU_MUTEX_INIT(HPU_RANK_RECIPE, "recipe cache");
static entry_t *buckets[NBUCKETS];
static entry_t *lru_head, *lru_tail;
static size_t count, used_bytes;
static size_t max_entries = DEFAULT_ENTRIES, max_bytes = DEFAULT_BYTES;

hpu_status_t hpu_recipe_cache_configure(void) {
  long long entries;
  unsigned long long bytes;
  hpu_status_t st = hpu_env_int("PT_HPU_RECIPE_CACHE_SIZE", DEFAULT_ENTRIES, 1, 1 << 24, &entries);
  if (st == HPU_SUCCESS)
    st = hpu_env_size("PT_HPU_RECIPE_CACHE_BYTES", DEFAULT_BYTES, 0, 1ULL << 40, &bytes);
  if (st == HPU_SUCCESS) hpu_recipe_cache_set_limits((size_t)entries, (size_t)bytes);
  return st;
}

static size_t entry_bytes(const entry_t *e) {
  size_t b = sizeof *e + e->sig.cap * sizeof *e->sig.words;
  if (e->plan)
    b += sizeof *e->plan + (size_t)e->plan->num_nodes * sizeof *e->plan->group_of +
         (size_t)e->plan->num_groups * sizeof *e->plan->groups;
  return b;
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
  used_bytes -= e->bytes;
  free(e);
  count--;
}

/* With mu held: evicts from the cold end until one more entry of `extra`
 * bytes fits. */
static void evict_for(size_t extra) {
  while (lru_tail && (count + 1 > max_entries || used_bytes + extra > max_bytes)) {
    remove_entry(lru_tail);
    hpu_metric_add("recipe_cache_evict", 1);
  }
}

int hpu_recipe_cache_lookup(const hpu_signature_t *sig, const hpu_node_t *nodes, int n,
                            const uint8_t *dead, hpu_plan_t **plan, int *stale) {
  *plan = NULL;
  if (stale) *stale = 0;
  hpu_mutex_lock(&mu);
  for (entry_t *e = buckets[sig->hash % NBUCKETS]; e; e = e->chain) {
    if (!hpu_signature_equal(&e->sig, sig)) continue;
    /* No plan means node by node, which is right whatever the aliasing. */
    if (e->plan && nodes && !hpu_plan_check(e->plan, nodes, n, dead, NULL, 0)) {
      if (stale) *stale = 1;
      continue;
    }
    lru_unlink(e);
    lru_push_front(e);
    if (e->plan) *plan = hpu_plan_copy(e->plan);
    hpu_mutex_unlock(&mu);
    return 1;
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
  e->bytes = entry_bytes(e);
  memset(sig, 0, sizeof *sig);
  hpu_mutex_lock(&mu);
  if (e->bytes > max_bytes) { /* would evict everything and still not fit */
    hpu_mutex_unlock(&mu);
    hpu_metric_add("recipe_cache_evict", 1);
    hpu_signature_free(&e->sig);
    hpu_plan_free(e->plan);
    free(e);
    return;
  }
  evict_for(e->bytes);
  e->chain = buckets[e->sig.hash % NBUCKETS];
  buckets[e->sig.hash % NBUCKETS] = e;
  lru_push_front(e);
  count++;
  used_bytes += e->bytes;
  hpu_mutex_unlock(&mu);
}

void hpu_recipe_cache_set_limits(size_t entries, size_t bytes) {
  hpu_mutex_lock(&mu);
  max_entries = entries > 0 ? entries : 1;
  max_bytes = bytes;
  /* Shrink now: evict until the bounds hold with nothing more to add. */
  while (lru_tail && (count > max_entries || used_bytes > max_bytes)) {
    remove_entry(lru_tail);
    hpu_metric_add("recipe_cache_evict", 1);
  }
  hpu_mutex_unlock(&mu);
}

size_t hpu_recipe_cache_bytes(void) {
  hpu_mutex_lock(&mu);
  size_t b = used_bytes;
  hpu_mutex_unlock(&mu);
  return b;
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
