/* Device trace events for executed nodes (graph/trace_nodes.c), on the card
 * whose task runs them. Call only while hpu_trace_active(). */
#ifndef HPU_GRAPH_TRACE_NODES_H
#define HPU_GRAPH_TRACE_NODES_H

#include <stdint.h>

#include "hpu/op.h"
#include "hpu/trace.h"

void hpu_trace_node(const hpu_node_t *node, uint64_t t0, uint64_t t1);
/* A fused group: nodes[0, count) ran as one kernel. */
void hpu_trace_fused(const hpu_node_t *nodes, int count, uint64_t t0, uint64_t t1);

#endif
