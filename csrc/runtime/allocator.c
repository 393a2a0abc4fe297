/* The caching allocator, modelled on PyTorch's CUDA caching allocator.
 *
 * Requests are rounded up to 512 bytes. Two pools:
 *  - small: requests <= 1 MiB, carved from 2 MiB segments;
 *  - large: requests < 10 MiB get a 20 MiB segment, bigger ones a segment
 *    rounded up to a multiple of 2 MiB (PyTorch's kLargeBuffer/kMinLargeAlloc),
 *    2 MiB more at multiples of 64 MiB (segment_size says why).
 * A request takes the best-fitting cached free block of its pool (smallest
 * size, then lowest address) and splits off the rest when the remainder is
 * worth keeping (>= 512 B in the small pool, > 1 MiB in the large one).
 * Frees coalesce with free neighbours in the same segment and keep the block
 * cached; segments go back to the arena only on empty_cache or when a request
 * cannot be met otherwise (then the allocator retries once).
 *
 * Blocks never move between segments and segments start 2 MiB-aligned in the
 * arena, so every pointer is 512-byte aligned. One mutex per card.
 *
 * A loop of small ops frees and asks again for the same few sizes; sorting
 * each such free into the pool (and splitting it out again) was a fifth of
 * a tiny op's host time. So small frees are parked: counted as freed at
 * once, but kept off the pool in a short list that a request of the same
 * size takes from. Any other request, empty_cache and the statistics put
 * every parked block back first, so the pool and its numbers are as if
 * nothing had been parked. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/lazy.h"
#include "hpu/memory.h"
#include "hpu/status_page.h"
#include "runtime/hash.h"
#include "runtime/lock.h"
#include "runtime/runtime.h"

#define ROUND ((size_t)512)
#define SMALL_SIZE ((size_t)1 << 20)
#define SMALL_SEGMENT ((size_t)2 << 20)
#define LARGE_SEGMENT ((size_t)20 << 20)
#define MIN_LARGE_ALLOC ((size_t)10 << 20)
#define ROUND_LARGE ((size_t)2 << 20)
#define PARK_MAX_SIZE ((size_t)64 << 10)
#define PARK_SLOTS 16

enum { POOL_SMALL, POOL_LARGE, NUM_POOLS };

typedef struct block {
  char *ptr;
  size_t size;
  size_t requested;
  int allocated;
  int pool;
  struct block *prev, *next; /* neighbours inside the segment */
  struct block *hnext;       /* live-block hash chain, or the spare list */
  void *owner;               /* the HPU graph captured while it was allocated */
  int user_freed;            /* freed by its user, kept for its graph's replays */
} block_t;

typedef struct {
  block_t **v; /* sorted by (size, ptr) */
  size_t n, cap;
} block_set_t;

typedef struct card {
  hpu_mutex_t mu;
  hpu_arena_t *arena;
  _Atomic(char *) base; /* published once the arena exists, for pointer lookup */
  size_t size;
  block_set_t pools[NUM_POOLS];
  block_t **buckets; /* live blocks by pointer */
  size_t nbuckets, nlive;
  block_t *spare; /* recycled block records */
  void *capture_owner; /* an HPU graph being captured on this card, or NULL */
  int capture_thread_only; /* ... whose blocks are only the capturing thread's */
  pthread_t capture_thread;
  /* Blocks of the capture freed by their users during it: the capture's
   * next allocations reuse them (replays run its nodes in the recorded
   * order, so a later temporary may overwrite an earlier dead one), as a
   * CUDA graph's private pool does. Emptied when the capture ends. */
  block_t **reusable;
  size_t nreusable, capreusable;
  block_t *parked[PARK_SLOTS]; /* freed small blocks not yet back in the pool */
  int nparked;
  int releasing;             /* release_cached calls holding blocks out of the pool */
  pthread_cond_t released;   /* signalled when one of them is done */
  hpu_memory_stats_t st;
} card_t;

static card_t cards[HPU_MAX_CARDS] = {
    [0 ... HPU_MAX_CARDS - 1] = {.mu = HPU_MUTEX_INIT(HPU_RANK_ALLOCATOR, "allocator"),
                                 .released = PTHREAD_COND_INITIALIZER}};

/* Called with c->mu held after the numbers changed: hl-smi's view. */
static void publish(card_t *c, int device) {
  hpu_status_page_memory(device, c->st.allocated_bytes, c->st.reserved_bytes, c->st.peak_allocated_bytes);
}

/* ---- block records ---- */

static block_t *block_new(card_t *c) {
  block_t *b = c->spare;
  if (b) c->spare = b->hnext;
  else b = malloc(sizeof *b);
  if (b) memset(b, 0, sizeof *b);
  return b;
}

static void block_recycle(card_t *c, block_t *b) {
  b->hnext = c->spare;
  c->spare = b;
}

static int is_split(const block_t *b) { return b->prev || b->next; }

/* ---- free pools: sorted arrays with binary search ---- */

static int block_less(const block_t *a, size_t size, const char *ptr) {
  return a->size < size || (a->size == size && a->ptr < ptr);
}

static size_t set_lower_bound(const block_set_t *s, size_t size, const char *ptr) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (block_less(s->v[mid], size, ptr)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int pool_insert(card_t *c, block_t *b) {
  block_set_t *s = &c->pools[b->pool];
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    block_t **v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  size_t i = set_lower_bound(s, b->size, b->ptr);
  memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
  s->v[i] = b;
  s->n++;
  if (is_split(b)) {
    c->st.inactive_split_blocks++;
    c->st.inactive_split_bytes += b->size;
  }
  return 0;
}

static void pool_remove(card_t *c, block_t *b) {
  block_set_t *s = &c->pools[b->pool];
  size_t i = set_lower_bound(s, b->size, b->ptr);
  if (i < s->n && s->v[i] == b) {
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
  }
  if (is_split(b)) {
    c->st.inactive_split_blocks--;
    c->st.inactive_split_bytes -= b->size;
  }
}

/* ---- live blocks: chained hash on the pointer ---- */

static size_t hash_ptr(const void *p, size_t nbuckets) {
  return (size_t)hpu_hash_ptr(p, 9) & (nbuckets - 1);
}

static int live_insert(card_t *c, block_t *b) {
  if (c->nlive >= c->nbuckets) {
    size_t nb = c->nbuckets ? 2 * c->nbuckets : 256;
    block_t **buckets = calloc(nb, sizeof *buckets);
    if (!buckets) return -1;
    for (size_t i = 0; i < c->nbuckets; i++) {
      for (block_t *x = c->buckets[i], *next; x; x = next) {
        next = x->hnext;
        size_t h = hash_ptr(x->ptr, nb);
        x->hnext = buckets[h];
        buckets[h] = x;
      }
    }
    free(c->buckets);
    c->buckets = buckets;
    c->nbuckets = nb;
  }
  size_t h = hash_ptr(b->ptr, c->nbuckets);
  b->hnext = c->buckets[h];
  c->buckets[h] = b;
  c->nlive++;
  return 0;
}

static block_t *live_remove(card_t *c, const void *p) {
  if (!c->nbuckets) return NULL;
  block_t **link = &c->buckets[hash_ptr(p, c->nbuckets)];
  for (; *link; link = &(*link)->hnext) {
    if ((*link)->ptr == p) {
      block_t *b = *link;
      *link = b->hnext;
      b->hnext = NULL;
      c->nlive--;
      return b;
    }
  }
  return NULL;
}

/* ---- segments ---- */

/* A large segment whose size is a multiple of STAGGER_EVERY gets STAGGER
 * more, so that big tensors allocated one after another (a, b and out of
 * 256 MiB each) do not start a multiple of 256 MiB apart: on an AMD EPYC
 * (Zen 4 class), two streams that far apart ran at 0.55-0.65 of the
 * bandwidth (docs/PERFORMANCE.md). PyTorch's CPU tensors come from
 * mmap with a header page and never line up so. The extra 2 MiB is split
 * off as a free block the large pool can still use. The price: up to 3% of
 * the memory of such tensors, so a card filled to its last few percent with
 * them runs out a tensor sooner (new_segment then falls back to the exact
 * size only for the segment that does not fit). */
#define STAGGER_EVERY ((size_t)64 << 20)
#define STAGGER ((size_t)2 << 20)

static size_t segment_size(size_t size, int stagger) {
  if (size <= SMALL_SIZE) return SMALL_SEGMENT;
  if (size < MIN_LARGE_ALLOC) return LARGE_SEGMENT;
  size_t seg = (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
  return stagger && seg % STAGGER_EVERY == 0 ? seg + STAGGER : seg;
}

static hpu_status_t ensure_arena(card_t *c, int device) {
  if (c->arena) return HPU_SUCCESS;
  hpu_status_t st = hpu_arena_open(device, hpu_rt_card_memory(), &c->arena);
  if (st != HPU_SUCCESS) return st;
  c->size = hpu_arena_size(c->arena);
  atomic_store_explicit(&c->base, (char *)hpu_arena_base(c->arena), memory_order_release);
  return HPU_SUCCESS;
}

static void free_block_locked(card_t *c, block_t *b);
static void return_block_locked(card_t *c, block_t *b);

static void unpark_all(card_t *c) {
  for (int i = 0; i < c->nparked; i++) return_block_locked(c, c->parked[i]);
  c->nparked = 0;
}

/* The parked block of exactly this size at the lowest address, taken off
 * the list; NULL when there is none. */
static block_t *unpark_size(card_t *c, size_t size) {
  int best = -1;
  for (int i = 0; i < c->nparked; i++)
    if (c->parked[i]->size == size && (best < 0 || c->parked[i]->ptr < c->parked[best]->ptr))
      best = i;
  if (best < 0) return NULL;
  block_t *b = c->parked[best];
  c->parked[best] = c->parked[--c->nparked];
  return b;
}

/* Returns every cached block that spans a whole segment to the arena;
 * called without c->mu. Freed blocks may still be read or written by work
 * recorded or queued before they were freed (stream-ordered reuse), and
 * releasing punches their pages out of the memfd (they would read back as
 * zeros). So the blocks are first taken out of the pool, where nothing new
 * can get them, then the card's recorded work is flushed and its queue
 * drained with the allocator unlocked (a flush asks the allocator which
 * outputs are live, a queued collective asks it for the arena: lock.h),
 * and only then do the pages go back. If the flush fails, recorded work
 * that may read the blocks did not reach the queue: they stay cached. */
static void release_cached(card_t *c, int device) {
  hpu_mutex_lock(&c->mu);
  unpark_all(c);
  block_t *whole = NULL; /* chained through hnext, as the spare list is */
  for (int p = 0; p < NUM_POOLS; p++) {
    block_set_t *s = &c->pools[p];
    size_t keep = 0;
    for (size_t i = 0; i < s->n; i++) {
      block_t *b = s->v[i];
      if (is_split(b)) {
        s->v[keep++] = b;
        continue;
      }
      b->hnext = whole;
      whole = b;
    }
    s->n = keep;
  }
  if (whole) c->releasing++;
  hpu_mutex_unlock(&c->mu);
  if (!whole) return;

  int flushed = hpu_lazy_flush(device) == HPU_SUCCESS;
  hpu_queue_drain(device);

  hpu_mutex_lock(&c->mu);
  for (block_t *b = whole, *next; b; b = next) {
    next = b->hnext;
    b->hnext = NULL;
    if (!flushed) {
      if (pool_insert(c, b) != 0) hpu_error(HPU_ERROR_SYSTEM, "hpu: out of host memory for the free list");
      continue;
    }
    hpu_arena_release(c->arena, b->ptr, b->size);
    c->st.reserved_bytes -= b->size;
    c->st.num_segments--;
    block_recycle(c, b);
  }
  c->releasing--;
  publish(c, device);
  pthread_cond_broadcast(&c->released);
  hpu_mutex_unlock(&c->mu);
}

static hpu_status_t oom(card_t *c, int device, size_t nbytes) {
  char want[32], alloc[32], resv[32], cap[32], freeb[32];
  c->st.num_ooms++;
  hpu_format_bytes(want, sizeof want, nbytes);
  hpu_format_bytes(alloc, sizeof alloc, c->st.allocated_bytes);
  hpu_format_bytes(resv, sizeof resv, c->st.reserved_bytes);
  hpu_format_bytes(cap, sizeof cap, c->st.capacity);
  hpu_format_bytes(freeb, sizeof freeb, c->st.capacity - c->st.reserved_bytes);
  return hpu_error(HPU_ERROR_OUT_OF_MEMORY,
                   "hpu:%d out of memory: tried to allocate %s; %s allocated, %s reserved, "
                   "%s free, %s total capacity (HPU_CARD_MEMORY)",
                   device, want, alloc, resv, freeb, cap);
}

static card_t *card_locked(int device, hpu_status_t *st) {
  *st = hpu_rt_enter_device(device);
  if (*st != HPU_SUCCESS) return NULL;
  card_t *c = &cards[device];
  hpu_mutex_lock(&c->mu);
  c->st.capacity = hpu_rt_card_memory();
  return c;
}

/* ---- public API ---- */

/* The best-fitting cached free block of at least size bytes, taken out of
 * the pool; NULL when there is none. */
static block_t *take_from_pool(card_t *c, size_t size, int pool) {
  block_set_t *s = &c->pools[pool];
  size_t i = set_lower_bound(s, size, NULL);
  if (i >= s->n) return NULL;
  block_t *b = s->v[i];
  pool_remove(c, b);
  return b;
}

/* A new segment for a request of size bytes, or NULL when the arena has no
 * room for it. */
static char *new_segment(card_t *c, size_t size, size_t *seg) {
  *seg = segment_size(size, 1);
  char *p = hpu_arena_alloc(c->arena, *seg);
  if (!p && *seg != segment_size(size, 0)) { /* the stagger must not cause an OOM */
    *seg = segment_size(size, 0);
    p = hpu_arena_alloc(c->arena, *seg);
  }
  return p;
}

/* A block of exactly size bytes from the pool, or from a new segment,
 * splitting off the rest when it is worth keeping. Called with c->mu held;
 * when the arena is full, lets it go while the cache is released (see
 * release_cached), so the pool is looked at again after. */
static hpu_status_t carve_block(card_t *c, int device, size_t nbytes, size_t size, int pool,
                                block_t **out) {
  block_t *b = take_from_pool(c, size, pool);
  if (!b) {
    size_t seg;
    char *p = new_segment(c, size, &seg);
    if (!p) {
      /* Give the cached segments back and retry once, as PyTorch does. */
      hpu_mutex_unlock(&c->mu);
      release_cached(c, device);
      hpu_mutex_lock(&c->mu);
      c->st.num_alloc_retries++;
      /* Blocks another thread's release holds out of the pool are neither
       * free nor gone yet: wait for those releases (they need only this
       * lock to finish) before calling it out of memory. */
      while (c->releasing) hpu_cond_wait(&c->released, &c->mu);
      unpark_all(c);
      b = take_from_pool(c, size, pool);
      if (!b) p = new_segment(c, size, &seg);
    }
    if (!b && !p) return oom(c, device, nbytes);
    if (!b) {
      b = block_new(c);
      if (!b) {
        hpu_arena_release(c->arena, p, seg);
        return hpu_error(HPU_ERROR_SYSTEM, "hpu_malloc: out of host memory for block records");
      }
      b->ptr = p;
      b->size = seg;
      b->pool = pool;
      c->st.reserved_bytes += seg;
      c->st.num_segments++;
      if (c->st.reserved_bytes > c->st.peak_reserved_bytes)
        c->st.peak_reserved_bytes = c->st.reserved_bytes;
    }
  }

  size_t remaining = b->size - size;
  if (pool == POOL_SMALL ? remaining >= ROUND : remaining > SMALL_SIZE) {
    block_t *rest = block_new(c);
    if (rest) { /* without a record the block just stays whole */
      rest->ptr = b->ptr + size;
      rest->size = remaining;
      rest->pool = pool;
      rest->prev = b;
      rest->next = b->next;
      if (b->next) b->next->prev = rest;
      b->next = rest;
      b->size = size;
      if (pool_insert(c, rest) != 0) { /* undo the split */
        b->next = rest->next;
        if (rest->next) rest->next->prev = b;
        b->size += remaining;
        block_recycle(c, rest);
      }
    }
  }
  *out = b;
  return HPU_SUCCESS;
}

/* The capture the calling thread's allocations belong to, or NULL. */
static void *capture_owner_of_caller(const card_t *c) {
  if (!c->capture_owner) return NULL;
  if (c->capture_thread_only && !pthread_equal(c->capture_thread, pthread_self())) return NULL;
  return c->capture_owner;
}

/* A dead block of the capture for `size` bytes: the smallest that fits,
 * and not more than twice the size (a big block held for a small tensor
 * would keep the big one from a later big tensor). */
static block_t *take_reusable(card_t *c, size_t size) {
  size_t best = c->nreusable;
  for (size_t i = 0; i < c->nreusable; i++) {
    size_t have = c->reusable[i]->size;
    if (have >= size && have / 2 <= size && (best == c->nreusable || have < c->reusable[best]->size))
      best = i;
  }
  if (best == c->nreusable) return NULL;
  block_t *b = c->reusable[best];
  c->reusable[best] = c->reusable[--c->nreusable];
  return b;
}

hpu_status_t hpu_malloc(int device, size_t nbytes, void **ptr) {
  if (!ptr) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_malloc: ptr is NULL");
  *ptr = NULL;
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  if (nbytes == 0) goto out;
  if (nbytes > c->st.capacity) {
    st = oom(c, device, nbytes);
    goto out;
  }
  st = ensure_arena(c, device);
  if (st != HPU_SUCCESS) goto out;

  size_t size = (nbytes + ROUND - 1) / ROUND * ROUND;
  int pool = size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
  void *owner = capture_owner_of_caller(c);
  if (owner) {
    block_t *reused = take_reusable(c, size);
    if (reused) {
      c->st.requested_bytes -= reused->requested;
      c->st.requested_bytes += nbytes;
      c->st.num_allocs++;
      reused->requested = nbytes;
      reused->user_freed = 0;
      *ptr = reused->ptr;
      goto out;
    }
  }
  /* A parked block of this size is still split off and out of the pool. */
  block_t *b = c->nparked ? unpark_size(c, size) : NULL;
  if (!b) {
    unpark_all(c);
    st = carve_block(c, device, nbytes, size, pool, &b);
    if (st != HPU_SUCCESS) goto out;
  }
  if (live_insert(c, b) != 0) {
    return_block_locked(c, b);
    st = hpu_error(HPU_ERROR_SYSTEM, "hpu_malloc: out of host memory for the block table");
    goto out;
  }
  b->allocated = 1;
  b->owner = owner;
  b->user_freed = 0;
  b->requested = nbytes;
  c->st.allocated_bytes += b->size;
  c->st.requested_bytes += nbytes;
  c->st.active_blocks++;
  c->st.num_allocs++;
  if (c->st.allocated_bytes > c->st.peak_allocated_bytes)
    c->st.peak_allocated_bytes = c->st.allocated_bytes;
  *ptr = b->ptr;
out:
  publish(c, device);
  hpu_mutex_unlock(&c->mu);
  return st;
}

static block_t *live_find(card_t *c, const void *p) {
  if (!c->nbuckets) return NULL;
  for (block_t *b = c->buckets[hash_ptr(p, c->nbuckets)]; b; b = b->hnext)
    if (b->ptr == p) return b;
  return NULL;
}

hpu_status_t hpu_free(int device, void *ptr) {
  if (!ptr) return hpu_rt_enter_device(device);
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  block_t *owned = live_find(c, ptr);
  if (owned && owned->owner) {
    /* An HPU graph's memory: its replays will write here again, so the
     * block stays out of the pool until the graph is destroyed; while its
     * capture goes on, the capture may reuse it. */
    if (owned->user_freed) {
      hpu_mutex_unlock(&c->mu);
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_free: pointer %p on hpu:%d was already freed", ptr, device);
    }
    owned->user_freed = 1;
    if (owned->owner == c->capture_owner) {
      if (c->nreusable == c->capreusable) {
        size_t cap = c->capreusable ? 2 * c->capreusable : 64;
        block_t **v = realloc(c->reusable, cap * sizeof *v);
        if (v) {
          c->reusable = v;
          c->capreusable = cap;
        }
      }
      if (c->nreusable < c->capreusable) c->reusable[c->nreusable++] = owned; /* else: just not reused */
    }
    hpu_mutex_unlock(&c->mu);
    return HPU_SUCCESS;
  }
  block_t *b = live_remove(c, ptr);
  if (!b) {
    hpu_mutex_unlock(&c->mu);
    int owner = -1;
    hpu_pointer_get_device(ptr, &owner);
    if (owner >= 0 && owner != device)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "hpu_free: pointer %p belongs to hpu:%d, not hpu:%d", ptr, owner, device);
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu_free: pointer %p was not returned by hpu_malloc on hpu:%d "
                     "(or was already freed)", ptr, device);
  }
  free_block_locked(c, b);
  publish(c, device);
  hpu_mutex_unlock(&c->mu);
  return HPU_SUCCESS;
}

/* Counts a live block (already out of the live table) as freed, and parks
 * it or returns it to its pool. */
static void free_block_locked(card_t *c, block_t *b) {
  c->st.allocated_bytes -= b->size;
  c->st.requested_bytes -= b->requested;
  c->st.active_blocks--;
  c->st.num_frees++;
  b->requested = 0;
  b->owner = NULL;
  if (b->pool == POOL_SMALL && b->size <= PARK_MAX_SIZE && c->nparked < PARK_SLOTS) {
    c->parked[c->nparked++] = b; /* stays marked allocated: neighbours do not merge into it */
    return;
  }
  return_block_locked(c, b);
}

/* Puts a freed block back into its pool, merging free neighbours. */
static void return_block_locked(card_t *c, block_t *b) {
  b->allocated = 0;
  block_t *prev = b->prev, *next = b->next;
  if (prev && !prev->allocated) {
    pool_remove(c, prev);
    prev->size += b->size;
    prev->next = next;
    if (next) next->prev = prev;
    block_recycle(c, b);
    b = prev;
  }
  if (next && !next->allocated) {
    pool_remove(c, next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    block_recycle(c, next);
  }
  if (pool_insert(c, b) != 0) /* host OOM: the block is lost to this process */
    hpu_error(HPU_ERROR_SYSTEM, "hpu_free: out of host memory for the free list");
}

hpu_status_t hpu_memory_empty_cache(int device) {
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  int has_arena = c->arena != NULL;
  hpu_mutex_unlock(&c->mu);
  if (has_arena) release_cached(c, device);
  return HPU_SUCCESS;
}

hpu_status_t hpu_memory_get_stats(int device, hpu_memory_stats_t *stats) {
  if (!stats) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_memory_get_stats: stats is NULL");
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  unpark_all(c); /* so the split-block counts are the pool's real ones */
  *stats = c->st;
  hpu_mutex_unlock(&c->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_memory_reset_peak(int device) {
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  c->st.peak_allocated_bytes = c->st.allocated_bytes;
  c->st.peak_reserved_bytes = c->st.reserved_bytes;
  publish(c, device);
  hpu_mutex_unlock(&c->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_memory_reset_accumulated(int device) {
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  c->st.num_allocs = c->st.num_frees = c->st.num_ooms = c->st.num_alloc_retries = 0;
  hpu_mutex_unlock(&c->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes) {
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  if (free_bytes) *free_bytes = (size_t)(c->st.capacity - c->st.reserved_bytes);
  if (total_bytes) *total_bytes = (size_t)c->st.capacity;
  hpu_mutex_unlock(&c->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_memory_arena(int device, int *memfd, void **base, size_t *size) {
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  st = ensure_arena(c, device);
  if (st == HPU_SUCCESS) {
    if (memfd) *memfd = hpu_arena_fd(c->arena);
    if (base) *base = hpu_arena_base(c->arena);
    if (size) *size = hpu_arena_size(c->arena);
  }
  hpu_mutex_unlock(&c->mu);
  return st;
}

hpu_status_t hpu_pointer_get_device(const void *p, int *device) {
  if (!device) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_pointer_get_device: device is NULL");
  *device = -1;
  /* Arenas are never unmapped, and base/size are published before use:
   * no lock needed, so this is cheap enough for every dispatch. */
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    char *base = atomic_load_explicit(&cards[i].base, memory_order_acquire);
    if (base && (const char *)p >= base && (const char *)p < base + cards[i].size) {
      *device = i;
      break;
    }
  }
  return HPU_SUCCESS;
}

int hpu_memory_is_allocated(const void *block_start) {
  uint8_t live;
  hpu_memory_are_allocated(&block_start, 1, &live);
  return live;
}

void hpu_memory_are_allocated(const void *const *block_starts, int n, uint8_t *live) {
  hpu_memory_are_held(block_starts, NULL, n, live);
}

void hpu_memory_are_held(const void *const *block_starts, const uint64_t *needed, int n, uint8_t *live) {
  /* Lazy mode asks this for every fusible output of every step: one lock per
   * run of pointers on the same card instead of one per pointer. */
  card_t *locked = NULL;
  for (int i = 0; i < n; i++) {
    int device = -1;
    if (hpu_pointer_get_device(block_starts[i], &device) != HPU_SUCCESS || device < 0) {
      live[i] = 1;
      continue;
    }
    card_t *c = &cards[device];
    if (c != locked) {
      if (locked) hpu_mutex_unlock(&locked->mu);
      hpu_mutex_lock(&c->mu);
      locked = c;
    }
    block_t *b = live_find(c, block_starts[i]);
    live[i] = (uint8_t)(b && !b->user_freed && (!needed || b->requested >= needed[i]));
  }
  if (locked) hpu_mutex_unlock(&locked->mu);
}

void hpu_alloc_capture_begin(int device, void *owner, int thread_only) {
  card_t *c = &cards[device];
  hpu_mutex_lock(&c->mu);
  c->capture_owner = owner;
  c->capture_thread_only = thread_only;
  c->capture_thread = pthread_self();
  hpu_mutex_unlock(&c->mu);
}

void hpu_alloc_capture_end(int device) {
  card_t *c = &cards[device];
  hpu_mutex_lock(&c->mu);
  c->capture_owner = NULL;
  c->nreusable = 0;
  hpu_mutex_unlock(&c->mu);
}

hpu_status_t hpu_alloc_owned_size(int device, void *owner, const void *ptr, size_t *size) {
  *size = 0;
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  block_t *b = live_find(c, ptr);
  int ok = b && owner && b->owner == owner;
  if (ok) *size = b->size;
  hpu_mutex_unlock(&c->mu);
  if (!ok)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu graph: block %p on hpu:%d was not allocated by this graph's capture", ptr, device);
  return HPU_SUCCESS;
}

hpu_status_t hpu_alloc_disown(int device, void *owner, void *ptr) {
  hpu_status_t st;
  card_t *c = card_locked(device, &st);
  if (!c) return st;
  block_t *b = live_find(c, ptr);
  if (!b || !owner || b->owner != owner) {
    hpu_mutex_unlock(&c->mu);
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu graph: block %p on hpu:%d was not allocated by this graph's capture", ptr, device);
  }
  b->owner = NULL;
  if (b->user_freed) {
    live_remove(c, b->ptr);
    free_block_locked(c, b);
  }
  publish(c, device);
  hpu_mutex_unlock(&c->mu);
  return HPU_SUCCESS;
}

void hpu_alloc_release_owner(int device, void *owner) {
  card_t *c = &cards[device];
  hpu_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->nbuckets; i++) {
    for (block_t *b = c->buckets[i], *next; b; b = next) {
      next = b->hnext;
      if (b->owner != owner) continue;
      b->owner = NULL;
      if (b->user_freed) {
        live_remove(c, b->ptr);
        free_block_locked(c, b);
      }
    }
  }
  hpu_mutex_unlock(&c->mu);
}
