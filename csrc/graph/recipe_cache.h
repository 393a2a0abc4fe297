/* The bounded LRU cache of compiled recipes, keyed by graph signature. */
#ifndef HPU_GRAPH_RECIPE_CACHE_H
#define HPU_GRAPH_RECIPE_CACHE_H

#include "graph/signature.h"

#include "graph/fusion.h"

/* Looks the signature up; on a hit returns 1, marks the recipe most
 * recently used and sets *plan to a copy of its plan (NULL: none). On a miss
 * returns 0 and leaves *plan NULL. The signature stays the caller's.
 *
 * The signature holds no addresses, but the plan depends on how the
 * graph's operands overlap in memory (views, in-place ops, blocks the
 * allocator reused within the graph). So when nodes is not NULL, a cached
 * fused plan counts only if hpu_plan_check finds it is the plan this graph
 * would compile to; several plans may be kept under one signature, one per
 * aliasing seen. *stale (may be NULL) is set when the signature was found
 * but none of its plans fits, for the recompile reason. */
int hpu_recipe_cache_lookup(const hpu_signature_t *sig, const hpu_node_t *nodes, int n,
                            const uint8_t *dead, hpu_plan_t **plan, int *stale);
/* Inserts a compiled recipe, taking ownership of sig's words and of plan
 * (may be NULL), evicting the least recently used past capacity. */
void hpu_recipe_cache_insert(hpu_signature_t *sig, hpu_plan_t *plan);
/* Reads PT_HPU_RECIPE_CACHE_SIZE (recipes, default 1024) and
 * PT_HPU_RECIPE_CACHE_BYTES (host bytes, default 256M) into the bounds. */
hpu_status_t hpu_recipe_cache_configure(void);
/* Sets both bounds, evicting at once what no longer fits. */
void hpu_recipe_cache_set_limits(size_t entries, size_t bytes);
/* Host bytes the cached recipes hold (signatures, plans, entries). */
size_t hpu_recipe_cache_bytes(void);

#endif
