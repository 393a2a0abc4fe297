/* The structural signature of a graph: what a compiled recipe depends on. */
#ifndef HPU_GRAPH_SIGNATURE_H
#define HPU_GRAPH_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

#include "hpu/op.h"

typedef struct hpu_signature {
  int64_t *words;   /* serialized structure, compared exactly on lookup */
  size_t len, cap;
  uint64_t hash;    /* of words, a word at a time */
  int num_nodes;
} hpu_signature_t;

/* Builds the signature of nodes[0..n): op codes, operand counts, dtypes,
 * shapes, strides, for each input the node that produced it in this graph
 * (exact same view) or "external", scalar kinds (not values) and integer
 * params, and which outputs are dead after the graph (dead[i], may be NULL:
 * the fusion plan depends on it). Returns 0 on host out-of-memory. */
int hpu_signature_build(hpu_signature_t *sig, const hpu_node_t *nodes, int n,
                        const uint8_t *dead);
void hpu_signature_free(hpu_signature_t *sig);
int hpu_signature_equal(const hpu_signature_t *a, const hpu_signature_t *b);
/* Why b needed a new compilation although a ran before: "" if the op
 * sequences differ in length only, else names the first differing node and
 * operand shape. Writes a human-readable sentence to buf. */
void hpu_signature_explain(const hpu_signature_t *prev, const hpu_signature_t *cur,
                           const hpu_node_t *cur_nodes, char *buf, size_t len);

#endif
