/* Between lazy.c and capture.c. */
#ifndef HPU_GRAPH_LAZY_INTERNAL_H
#define HPU_GRAPH_LAZY_INTERNAL_H

#include "hpu/op.h"
#include "hpu/status.h"
#include "hpu/stream.h"

/* If the stream's card is capturing, records the node into the capture
 * (setting *st) and returns 1; otherwise returns 0. */
int hpu_capture_record(hpu_stream_t stream, const hpu_node_t *node, hpu_status_t *st);

#endif
