/* Lazy mode: ops are recorded into a per-card pending graph instead of being
 * launched one by one; the graph runs at a flush (mark_step, a host read, a
 * synchronize, anything else put on the card's queue, or when it grows past
 * a bound). A flushed graph is hashed on its structure (ops, dtypes, shapes,
 * strides, which node feeds which, kernel-relevant params; never addresses,
 * data or per-step scalar values) and looked up in a bounded LRU recipe
 * cache; a miss compiles a recipe and, when the previous graph on the card
 * had the same ops, records why it recompiled (which shape changed).
 *
 * Environment (read once, checked by hpu_init):
 *   PT_HPU_LAZY_MODE          1 = lazy (the default, as in Gaudi's lazy releases), 0 = eager
 *   PT_HPU_MAX_GRAPH_NODES    flush when a pending graph reaches this size (2048)
 *   PT_HPU_RECIPE_CACHE_SIZE  recipes kept (LRU, 1024)
 *   PT_HPU_RECIPE_CACHE_BYTES host bytes the kept recipes may hold (LRU, 256M)
 *   PT_HPU_RECIPE_CACHE_CONFIG  dir[,delete at start,max MB]: recipes also
 *                             persisted on disk and reused by later processes
 *   PT_HPU_LOG_GRAPH_COMPILE  1 = print each compilation and its reason to stderr
 * Counters (hpu/metrics.h): graph_compilation, graph_compilation_us,
 * recipe_cache_hit, recipe_cache_miss, recipe_cache_evict,
 * recipe_cache_alias_miss (a cached plan of another aliasing), the time of
 * the lookups with their plan checks (recipe_cache_lookup_us), graph_launch,
 * graph_nodes. */
#ifndef HPU_LAZY_H
#define HPU_LAZY_H

#include <stddef.h>
#include "hpu/op.h"
#include "hpu/status.h"
#include "hpu/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the settings above (and PT_HPU_RECIPE_CACHE_BYTES) once they are
 * valid; a bad value is an error naming it. hpu_init calls it; until it
 * succeeds the getters use the defaults. */
hpu_status_t hpu_lazy_configure(void);
int hpu_lazy_enabled(void);
void hpu_lazy_set_enabled(int enabled);

/* Runs a node the way the current mode says: records it (lazy, validated
 * now so errors surface at the op) or launches it at once (eager). */
hpu_status_t hpu_submit(hpu_stream_t stream, const hpu_node_t *node);

/* Launches the card's pending graph (asynchronously; no-op when empty). */
hpu_status_t hpu_lazy_flush(int device);
/* The same for a caller that waits for the card next (synchronize, a read
 * to the host): the graph runs on the calling thread if the queue is idle. */
hpu_status_t hpu_lazy_flush_to_wait(int device);
/* mark_step: flushes the card and starts a new step (recompilation
 * reasons compare a graph with the one at the same position of the
 * previous step). */
hpu_status_t hpu_lazy_mark_step(int device);
/* Flushes every card. */
hpu_status_t hpu_lazy_flush_all(void);
int hpu_lazy_pending(int device);

/* The recipe cache. */
size_t hpu_recipe_cache_size(void);
void hpu_recipe_cache_clear(void);
/* The n-th most recent recompilation reason (0 = newest) into buf; returns 0
 * when there is none. At most 64 are kept. */
int hpu_recompile_reason(size_t n, char *buf, size_t len);
/* Records a recompilation the caller made (a compiled graph captured for a
 * new input signature), with why; PT_HPU_LOG_GRAPH_COMPILE=1 prints it. */
void hpu_recompile_note(int device, const char *why);

#ifdef __cplusplus
}
#endif
#endif
