/* Compiled recipes persisted across processes (PT_HPU_RECIPE_CACHE_CONFIG). */
#ifndef HPU_GRAPH_RECIPE_DISK_H
#define HPU_GRAPH_RECIPE_DISK_H

#include "graph/fusion.h"
#include "graph/signature.h"

/* Reads PT_HPU_RECIPE_CACHE_CONFIG (until that succeeds once): a malformed
 * value is an error naming it; a directory that cannot be used is said on
 * stderr and recipes stay in memory. */
hpu_status_t hpu_recipe_disk_configure(void);
/* 1 when PT_HPU_RECIPE_CACHE_CONFIG names a usable directory. */
int hpu_recipe_disk_enabled(void);
/* On a valid file for exactly this graph (signature, and a plan that
 * hpu_plan_check accepts for nodes and dead) returns 1 and sets *plan (may
 * be NULL: the recipe fuses nothing); else 0. Metrics: recipe_cache_disk_hit,
 * recipe_cache_disk_rejected (a file that exists but was refused; the reason
 * and the file's name go to stderr). */
int hpu_recipe_disk_load(const hpu_signature_t *sig, const hpu_node_t *nodes, const uint8_t *dead,
                         hpu_plan_t **plan);
/* Writes the recipe unless the size limit is reached (recipe_cache_disk_full). */
void hpu_recipe_disk_store(const hpu_signature_t *sig, const hpu_plan_t *plan);

#endif
