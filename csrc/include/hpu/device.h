/* Emulated cards: discovery, properties, process-level state. */
#ifndef HPU_DEVICE_H
#define HPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Environment read once by hpu_init():
 *   HPU_NUM_CARDS           cards on this "host" (default 8, max HPU_MAX_CARDS)
 *   HABANA_VISIBLE_DEVICES  comma list of card ids (e.g. "2,3"); visible card i
 *                           is physical card list[i]; "all" or unset = all
 *   HPU_CARD_MEMORY         arena capacity per card: bytes, or with K/M/G suffix
 *                           (default 16G; the arena is sparse, so unused
 *                           capacity costs nothing)
 * A bad value makes hpu_init fail with a message naming the variable. */
#define HPU_MAX_CARDS 64

hpu_status_t hpu_init(void);            /* idempotent, thread-safe */
int hpu_is_initialized(void);
hpu_status_t hpu_device_count(int *count);

typedef struct hpu_device_props {
  char name[64];          /* "GAUDI2" */
  int physical_id;        /* index among HPU_NUM_CARDS, after HABANA_VISIBLE_DEVICES */
  size_t total_memory;    /* arena capacity in bytes */
} hpu_device_props_t;

hpu_status_t hpu_device_get_props(int device, hpu_device_props_t *props);

/* Validates a visible card index (0 <= device < count). */
hpu_status_t hpu_device_check(int device);

/* Waits for all work queued on the card's streams; returns a deferred error. */
hpu_status_t hpu_device_synchronize(int device);

/* Process-wide kernel thread pool size (like torch.set_num_threads). */
hpu_status_t hpu_set_num_threads(int n);
int hpu_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
