/* LRU recipe cache. A recipe today is the signature itself: the executor
 * runs a recorded graph's nodes in order, so compiling is hashing plus
 * bookkeeping. Fusion and buffer planning (issue: lazy mode) will hang their
 * plans on the cached entry. */
#include <pthread.h>
#include <stdlib.h>

#include "graph/recipe_cache.h"
#include "hpu/lazy.h"
#include "hpu/metrics.h"

typedef struct entry {
  hpu_signature_t sig;
  struct entry *lru_prev, *lru_next; /* most recent at head */
  struct entry *chain;
} entry_t;

#define NBUCKETS 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
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
  free(e);
  count--;
}

int hpu_recipe_cache_lookup_or_insert(hpu_signature_t *sig) {
  pthread_mutex_lock(&mu);
  for (entry_t *e = buckets[sig->hash % NBUCKETS]; e; e = e->chain) {
    if (hpu_signature_equal(&e->sig, sig)) {
      lru_unlink(e);
      lru_push_front(e);
      pthread_mutex_unlock(&mu);
      hpu_signature_free(sig);
      return 1;
    }
  }
  entry_t *e = calloc(1, sizeof *e);
  if (e) {
    e->sig = *sig;
    e->chain = buckets[sig->hash % NBUCKETS];
    buckets[sig->hash % NBUCKETS] = e;
    lru_push_front(e);
    count++;
    while (count > cache_capacity() && lru_tail && lru_tail != e) {
      remove_entry(lru_tail);
      hpu_metric_add("recipe_cache_evict", 1);
    }
  } else {
    hpu_signature_free(sig);
  }
  pthread_mutex_unlock(&mu);
  return 0;
}

size_t hpu_recipe_cache_size(void) {
  pthread_mutex_lock(&mu);
  size_t n = count;
  pthread_mutex_unlock(&mu);
  return n;
}

void hpu_recipe_cache_clear(void) {
  pthread_mutex_lock(&mu);
  while (lru_head) remove_entry(lru_head);
  pthread_mutex_unlock(&mu);
}
