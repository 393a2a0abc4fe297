/* Kept scratch buffers (scratch.h): a fixed set of slots, each claimed by
 * one caller at a time with a compare-and-swap, so no lock is taken on a
 * kernel's hot path and none is held while it runs. A caller that finds
 * every slot busy gets a plain allocation, freed when put back. */
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/scratch.h"

static struct {
  _Atomic int busy;
  void *p;
  size_t n;
} slots[HPU_SCRATCH_SLOTS];

void *hpu_scratch_get(size_t n, int *slot) {
  n = (n + 63) / 64 * 64;
  if (n == 0) n = 64;
  for (int s = 0; s < HPU_SCRATCH_SLOTS; s++) {
    int z = 0;
    if (!atomic_compare_exchange_strong(&slots[s].busy, &z, 1)) continue;
    if (slots[s].n < n) {
      free(slots[s].p);
      slots[s].p = aligned_alloc(64, n);
      slots[s].n = slots[s].p ? n : 0;
      if (!slots[s].p) {
        atomic_store(&slots[s].busy, 0);
        return NULL;
      }
    }
    *slot = s;
    return slots[s].p;
  }
  *slot = -1;
  return aligned_alloc(64, n);
}

void hpu_scratch_put(void *p, int slot) {
  if (slot < 0) {
    free(p);
    return;
  }
  if (slots[slot].n > HPU_SCRATCH_KEEP_MAX) {
    free(slots[slot].p);
    slots[slot].p = NULL;
    slots[slot].n = 0;
  }
  atomic_store(&slots[slot].busy, 0);
}
