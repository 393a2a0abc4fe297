/* Graphs of op nodes and the one executor. Eager mode launches a one-node
 * graph; lazy mode (later) appends many nodes and launches at a flush. */
#ifndef HPU_GRAPH_H
#define HPU_GRAPH_H

#include "hpu/op.h"
#include "hpu/status.h"
#include "hpu/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpu_graph hpu_graph_t;

hpu_status_t hpu_graph_create(hpu_graph_t **graph);
void hpu_graph_destroy(hpu_graph_t *graph);
/* Validates and appends a copy of *node. */
hpu_status_t hpu_graph_append(hpu_graph_t *graph, const hpu_node_t *node);
int hpu_graph_num_nodes(const hpu_graph_t *graph);
/* The nodes, in order (valid until the next append). */
const hpu_node_t *hpu_graph_nodes(const hpu_graph_t *graph);
/* Enqueues the graph on the stream and takes ownership of it: the worker runs
 * the nodes in order and destroys the graph. Returns at once. */
hpu_status_t hpu_graph_launch(hpu_graph_t *graph, hpu_stream_t stream);
/* For a caller that waits for the card right after: when the card's queue
 * is idle the graph runs here, on the calling thread (an error is reported
 * by the wait, as from the worker); otherwise as hpu_graph_launch. */
hpu_status_t hpu_graph_run_or_launch(hpu_graph_t *graph, hpu_stream_t stream);

/* Eager: validate, then enqueue a one-node graph. */
hpu_status_t hpu_launch(hpu_stream_t stream, const hpu_node_t *node);

#ifdef __cplusplus
}
#endif
#endif
