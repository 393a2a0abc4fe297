/* Between lazy.c and capture.c. */
#ifndef HPU_GRAPH_LAZY_INTERNAL_H
#define HPU_GRAPH_LAZY_INTERNAL_H

#include <stdint.h>

#include "graph/fusion_plan.h"
#include "hpu/op.h"
#include "hpu/status.h"
#include "hpu/stream.h"

/* If the stream's card is capturing, records the node into the capture
 * (setting *st) and returns 1; otherwise returns 0. */
int hpu_capture_record(hpu_stream_t stream, const hpu_node_t *node, hpu_status_t *st);

/* PT_HPU_GRAPH_DUMP_DIR=<dir> (or Gaudi's GRAPH_VISUALIZATION=1, into
 * .graph_dumps) writes every compiled graph as text and DOT. */
void hpu_graph_dump_if_asked(int device, const hpu_node_t *nodes, int n, const hpu_plan_t *plan,
                             const uint8_t *dead, uint64_t hash);

#endif
