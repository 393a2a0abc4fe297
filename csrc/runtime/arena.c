/* A card's device memory: one memfd of the card's capacity (sparse: pages
 * exist only once touched), mapped MAP_SHARED so other processes on the host
 * can map it too (HCCL), plus a range allocator that hands out segments.
 *
 * Segments are few and large (>= 2 MiB), so the free list is a sorted array
 * of extents: best fit on allocation, coalescing with both neighbours on
 * release. The caller (the caching allocator) holds the card's lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/runtime.h"

typedef struct extent {
  size_t off, len;
} extent_t;

struct hpu_arena {
  int fd;
  char *base;
  size_t size;
  extent_t *free; /* sorted by offset, never adjacent (coalesced) */
  size_t nfree, cap;
};

hpu_status_t hpu_arena_open(int device, size_t size, hpu_arena_t **out) {
  char name[32];
  snprintf(name, sizeof name, "hpu:%d", device);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0)
    return hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: memfd_create failed: %s", device, strerror(errno));
  if (ftruncate(fd, (off_t)size) != 0) {
    int e = errno;
    close(fd);
    return hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: ftruncate of the %zu-byte arena failed: %s",
                     device, size, strerror(e));
  }
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    close(fd);
    return hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: mmap of the %zu-byte arena failed: %s", device,
                     size, strerror(e));
  }
  hpu_arena_t *a = calloc(1, sizeof *a);
  extent_t *ext = malloc(16 * sizeof *ext);
  if (!a || !ext) {
    free(a);
    free(ext);
    munmap(base, size);
    close(fd);
    return hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: out of host memory creating the arena", device);
  }
  a->fd = fd;
  a->base = base;
  a->size = size;
  a->free = ext;
  a->cap = 16;
  a->free[0] = (extent_t){0, size};
  a->nfree = 1;
  *out = a;
  return HPU_SUCCESS;
}

void *hpu_arena_alloc(hpu_arena_t *a, size_t size) {
  size_t best = a->nfree;
  for (size_t i = 0; i < a->nfree; i++)
    if (a->free[i].len >= size && (best == a->nfree || a->free[i].len < a->free[best].len))
      best = i;
  if (best == a->nfree) return NULL;
  extent_t *e = &a->free[best];
  char *p = a->base + e->off;
  e->off += size;
  e->len -= size;
  if (e->len == 0) {
    memmove(e, e + 1, (a->nfree - best - 1) * sizeof *e);
    a->nfree--;
  }
  return p;
}

void hpu_arena_release(hpu_arena_t *a, void *ptr, size_t size) {
  size_t off = (size_t)((char *)ptr - a->base);
  /* Give the pages back to the host; the range reads as zeros afterwards. */
  if (fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size) != 0)
    (void)madvise(ptr, size, MADV_REMOVE);
  size_t i = 0; /* first extent after off */
  size_t lo = 0, hi = a->nfree;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a->free[mid].off < off) lo = mid + 1;
    else hi = mid;
  }
  i = lo;
  int merge_prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
  int merge_next = i < a->nfree && off + size == a->free[i].off;
  if (merge_prev && merge_next) {
    a->free[i - 1].len += size + a->free[i].len;
    memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof(extent_t));
    a->nfree--;
  } else if (merge_prev) {
    a->free[i - 1].len += size;
  } else if (merge_next) {
    a->free[i].off = off;
    a->free[i].len += size;
  } else {
    if (a->nfree == a->cap) {
      extent_t *n = realloc(a->free, 2 * a->cap * sizeof *n);
      if (!n) return; /* host OOM: leak the range rather than corrupt the list */
      a->free = n;
      a->cap *= 2;
    }
    memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof(extent_t));
    a->free[i] = (extent_t){off, size};
    a->nfree++;
  }
}

int hpu_arena_fd(const hpu_arena_t *a) { return a->fd; }
void *hpu_arena_base(const hpu_arena_t *a) { return a->base; }
size_t hpu_arena_size(const hpu_arena_t *a) { return a->size; }
