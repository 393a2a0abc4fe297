/* The bounded LRU cache of compiled recipes, keyed by graph signature. */
#ifndef HPU_GRAPH_RECIPE_CACHE_H
#define HPU_GRAPH_RECIPE_CACHE_H

#include "graph/signature.h"

#include "graph/fusion.h"

/* Looks the signature up; on a hit returns 1, marks the recipe most
 * recently used and sets *plan to a copy of its plan (NULL: none). On a miss
 * returns 0 and leaves *plan NULL. The signature stays the caller's. */
int hpu_recipe_cache_lookup(const hpu_signature_t *sig, hpu_plan_t **plan);
/* Inserts a compiled recipe, taking ownership of sig's words and of plan
 * (may be NULL), evicting the least recently used past capacity. */
void hpu_recipe_cache_insert(hpu_signature_t *sig, hpu_plan_t *plan);

#endif
