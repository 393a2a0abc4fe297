/* Readable dumps of compiled graphs (text and Graphviz DOT). */
#ifndef HPU_GRAPH_DUMP_H
#define HPU_GRAPH_DUMP_H

#include <stdint.h>

#include "graph/fusion.h"

/* Writes <prefix>.txt and <prefix>.dot; returns 0 if a file cannot be
 * written. plan and dead may be NULL. */
int hpu_graph_dump(const char *prefix, int device, const hpu_node_t *nodes, int n,
                   const hpu_plan_t *plan, const uint8_t *dead, uint64_t hash);

#endif
