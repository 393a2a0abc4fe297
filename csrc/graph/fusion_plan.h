/* The fusion plan: what the planner (fusion_plan.c) decides and the
 * executor (fusion_exec.c) runs. A plan is plain data (the recipe caches
 * copy it and write it to disk), so everything the executor needs is here:
 * which nodes form each group, where each member reads its operands, which
 * outputs are stored, and the row op that ends a group. */
#ifndef HPU_GRAPH_FUSION_PLAN_H
#define HPU_GRAPH_FUSION_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "hpu/op.h"

#define HPU_FUSION_MAX_GROUP 32

typedef struct hpu_fused_group {
  int first, count;   /* nodes [first, first + count) of the graph */
  int64_t numel;
  /* For input k of member m: the member whose output it is (read from the
   * tile), or -1 (read from memory). */
  int8_t src[HPU_FUSION_MAX_GROUP][HPU_MAX_INPUTS];
  uint8_t store[HPU_FUSION_MAX_GROUP]; /* write member m's output to memory */
  /* A row op (softmax / log_softmax over the last dim, layer_norm, or a
   * sum / mean / var / std reduction over the last dim) right
   * after the members, reading member `feeder`'s output: it runs on each
   * block of rows as soon as the members have produced it, from a copy still
   * in cache, with its own eager kernel. rows_node = first + count, or -1. */
  int rows_node;
  int feeder;
  int64_t row_len;
} hpu_fused_group_t;

typedef struct hpu_plan {
  int num_nodes;
  int num_groups;
  int *group_of;             /* per node: its group, or -1 (runs alone) */
  hpu_fused_group_t *groups;
  int fused_nodes;           /* nodes inside groups */
  int dropped_stores;        /* intermediates never written to memory */
} hpu_plan_t;

/* dead[i] is 1 when node i's output is not needed after the graph (its
 * block is free at flush time, or a later node of the graph overwrites the
 * same view). Returns NULL on host out-of-memory or when nothing fuses. */
hpu_plan_t *hpu_plan_build(const hpu_node_t *nodes, int n, const uint8_t *dead);
hpu_plan_t *hpu_plan_copy(const hpu_plan_t *plan);
/* 1 when `plan` (a recipe read from disk, say) is one hpu_plan_build would
 * make for these nodes: every group exactly the group the planner forms at
 * its first node (same members, fusibility, element count, operand sources,
 * row op, stored outputs), every other node alone, and the counts right;
 * the executor may then trust every index and bound in it. Otherwise 0,
 * with the first failed check in why. Costs about as much as planning the
 * grouped nodes. */
int hpu_plan_check(const hpu_plan_t *plan, const hpu_node_t *nodes, int n, const uint8_t *dead,
                   char *why, size_t len);
/* Whether a node can join a fused group (elementwise, contiguous, float). */
int hpu_plan_node_fusible(const hpu_node_t *node);
void hpu_plan_free(hpu_plan_t *plan);

/* Per output of each node: 1 if dead after the graph (see above). */
void hpu_graph_dead_outputs(const hpu_node_t *nodes, int n, uint8_t *dead);

#endif
