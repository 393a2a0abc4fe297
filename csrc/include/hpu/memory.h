/* Device memory: a per-card arena (memfd, so peers on this host can map it)
 * and a caching allocator over it with PyTorch-style statistics.
 *
 * A device pointer is a host virtual address inside the card's arena mapping,
 * so kernels address it directly. The host itself must not read or write it
 * while queued work may still use it: copies go through the stream.
 *
 * Freed blocks are reusable at once by later allocations: all work of a card
 * runs in order on its queue, so work queued after the reuse runs after every
 * queued reader/writer of the old contents (stream-ordered reuse). */
#ifndef HPU_MEMORY_H
#define HPU_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes are rounded up to 512 bytes; allocations return 64-byte (at least)
 * aligned pointers. nbytes == 0 gives *ptr == NULL and HPU_SUCCESS.
 * Out of memory: HPU_ERROR_OUT_OF_MEMORY with a message naming the request,
 * the bytes allocated, reserved and the capacity; the caching allocator first
 * releases its cached free segments and retries once. */
hpu_status_t hpu_malloc(int device, size_t nbytes, void **ptr);
hpu_status_t hpu_free(int device, void *ptr);

/* Returns cached, completely free segments to the arena (and punches them
 * out of the memfd so the host gets the pages back). */
hpu_status_t hpu_memory_empty_cache(int device);

typedef struct hpu_memory_stats {
  uint64_t allocated_bytes;       /* in live blocks (rounded sizes) */
  uint64_t peak_allocated_bytes;
  uint64_t requested_bytes;       /* sum of sizes asked for by live blocks */
  uint64_t reserved_bytes;        /* in segments taken from the arena */
  uint64_t peak_reserved_bytes;
  uint64_t num_allocs;            /* cumulative */
  uint64_t num_frees;             /* cumulative */
  uint64_t num_segments;          /* current */
  uint64_t num_ooms;              /* cumulative */
  uint64_t num_alloc_retries;     /* cumulative: cache flushed to satisfy a request */
  uint64_t active_blocks;         /* current live blocks */
  uint64_t inactive_split_blocks; /* free blocks inside segments that also hold live blocks */
  uint64_t inactive_split_bytes;
  uint64_t capacity;              /* arena size (the limit) */
} hpu_memory_stats_t;

hpu_status_t hpu_memory_get_stats(int device, hpu_memory_stats_t *stats);
/* Sets peak_* to the current values. */
hpu_status_t hpu_memory_reset_peak(int device);
/* Resets the cumulative counters (num_allocs, num_frees, num_ooms, retries). */
hpu_status_t hpu_memory_reset_accumulated(int device);
/* free = capacity - reserved + cached-free-in-reserved is NOT counted:
 * as cudaMemGetInfo, free is what the arena has not handed to segments. */
hpu_status_t hpu_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes);

/* The arena, for sharing with other processes on this host (HCCL): the memfd
 * (owned by the core; dup it to keep it), its mapping and size. */
hpu_status_t hpu_memory_arena(int device, int *memfd, void **base, size_t *size);

/* 1 if block_start is the start of a live allocation of a card, or is not
 * device memory at all (host buffers count as live); 0 for a freed block.
 * Lazy mode uses it to find intermediates nobody holds any more. */
int hpu_memory_is_allocated(const void *block_start);

/* hpu_memory_is_allocated for n pointers at once: live[i] is 1 or 0. */
void hpu_memory_are_allocated(const void *const *block_starts, int n, uint8_t *live);
/* As hpu_memory_are_allocated, and live[i] only when the block's current
 * allocation asked for at least needed[i] bytes: a block the allocator has
 * since handed to a smaller tensor no longer holds the tensor that was
 * recorded there (NULL needed: any size). */
void hpu_memory_are_held(const void *const *block_starts, const uint64_t *needed, int n, uint8_t *live);

/* Which card's arena holds p; *device = -1 (and HPU_SUCCESS) for a pointer
 * outside every arena (host memory). */
hpu_status_t hpu_pointer_get_device(const void *p, int *device);

#ifdef __cplusplus
}
#endif
#endif
