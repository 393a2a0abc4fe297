/* A pointer -> chain map for graph passes: for each data address, the
 * operands recorded at it, latest first. Signatures look up the producer of
 * each input and fusion the later writers of each output; a scan over all
 * earlier nodes made both quadratic in the graph size, which on graphs of a
 * few thousand nodes cost more host time than recording them. */
#ifndef HPU_GRAPH_PTRMAP_H
#define HPU_GRAPH_PTRMAP_H

#include <stdint.h>

#include "hpu/op.h"

typedef struct hpu_ptrmap {
  const void **keys;  /* open addressing, NULL = empty */
  int32_t *heads;     /* latest item recorded at keys[i] */
  int32_t *next;      /* per item: the previous item at the same address, or -1 */
  uint32_t mask;
  int32_t items;      /* capacity in items */
} hpu_ptrmap_t;

/* Room for ids 0..ids-1 of which at most `pushes` are recorded. The table
 * is sized by the pushes, not the id space: graph passes number outputs
 * node << 3 | k, but most nodes have one output, and clearing a table 8x too
 * big was a visible part of a cache-hit flush. Returns 0 on host OOM. */
int hpu_ptrmap_init(hpu_ptrmap_t *m, int32_t ids, int32_t pushes);
/* The map of a graph's outputs: ids node << 3 | k, one push per output. */
int hpu_ptrmap_init_outputs(hpu_ptrmap_t *m, const hpu_node_t *nodes, int n);
void hpu_ptrmap_free(hpu_ptrmap_t *m);
/* Records item `id` at address p; it becomes the head of p's chain. */
void hpu_ptrmap_push(hpu_ptrmap_t *m, const void *p, int32_t id);
/* The latest item at p, or -1; walk older ones with m->next[id]. */
int32_t hpu_ptrmap_head(const hpu_ptrmap_t *m, const void *p);

#endif
