/* The bounded LRU cache of compiled recipes, keyed by graph signature. */
#ifndef HPU_GRAPH_RECIPE_CACHE_H
#define HPU_GRAPH_RECIPE_CACHE_H

#include "graph/signature.h"

/* Looks the signature up; on a hit returns 1 (and marks the recipe most
 * recently used). On a miss inserts it (taking ownership of *sig's words,
 * evicting the least recently used recipe past capacity) and returns 0.
 * Either way *sig is left empty or owned by the cache: do not free it. */
int hpu_recipe_cache_lookup_or_insert(hpu_signature_t *sig);

#endif
