/* Compiled recipes persisted across processes (PT_HPU_RECIPE_CACHE_CONFIG). */
#ifndef HPU_GRAPH_RECIPE_DISK_H
#define HPU_GRAPH_RECIPE_DISK_H

#include "graph/fusion.h"
#include "graph/signature.h"

/* 1 when PT_HPU_RECIPE_CACHE_CONFIG names a usable directory (read once). */
int hpu_recipe_disk_enabled(void);
/* On a valid file for exactly this signature returns 1 and sets *plan (may
 * be NULL: the recipe fuses nothing); else 0. Metrics: recipe_cache_disk_hit,
 * recipe_cache_disk_rejected (a file that did not match or was damaged). */
int hpu_recipe_disk_load(const hpu_signature_t *sig, hpu_plan_t **plan);
/* Writes the recipe unless the size limit is reached (recipe_cache_disk_full). */
void hpu_recipe_disk_store(const hpu_signature_t *sig, const hpu_plan_t *plan);

#endif
