/* Elementwise fusion for lazy-mode graphs.
 *
 * A run of consecutive elementwise nodes (the arithmetic ops, relu, and the
 * pointwise family's float ops: activations and their backwards, math,
 * clamp/where/lerp/addcmul...) over the same number of contiguous elements,
 * every operand in the compute dtype, becomes one pass over memory: each
 * thread walks its range in cache-sized tiles and evaluates every node of the run on the tile before
 * moving on, so an intermediate is read back from cache, and is not written
 * to memory at all when nobody holds it after the graph. An operand may
 * also broadcast into the run's shape (an attention mask [B,1,1,S] added to
 * scores [B,H,S,S]): it is read with stride 0 in the broadcast dims. A
 * softmax, layer norm or sum / mean / var / std over the last dim that
 * reads the run's result ends the group: it runs on each block of rows right
 * after the run produced it (attention's scale + mask -> softmax, the
 * residual add -> layer norm), with its eager kernel, so bitwise as eager.
 *
 * fusion_plan.c forms the groups (graph/fusion_plan.h, the plan, is what
 * it hands over); fusion_exec.c runs them. */
#ifndef HPU_GRAPH_FUSION_H
#define HPU_GRAPH_FUSION_H

#include "graph/fusion_plan.h"

/* Runs nodes with the plan (on the stream worker). */
hpu_status_t hpu_plan_execute(const hpu_plan_t *plan, const hpu_node_t *nodes, int n);

/* Gives the graph its plan (owned by the graph from here on); the worker
 * then runs it with hpu_plan_execute. */
struct hpu_graph;
void hpu_graph_attach_plan(struct hpu_graph *graph, hpu_plan_t *plan);

#endif
