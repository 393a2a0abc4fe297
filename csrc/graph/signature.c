/* Graph signatures: the recipe cache's key. Addresses, data and scalar
 * values never enter it, so a training step with a new learning rate or
 * new batch data replays the same recipe; shapes, strides, dtypes and the
 * dataflow between nodes do. How operands overlap in memory is not in it
 * (the allocator reuses blocks differently from step to step): a cached
 * plan is checked against the graph's real overlaps on every hit
 * (recipe_cache.c). */
#include "graph/signature.h"

#include "graph/ptrmap.h"
#include "runtime/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most words one node adds: its header, every operand with all its
 * dims and a producer, and the largest params (nn's). */
#define NODE_WORDS_MAX (2 + (HPU_MAX_INPUTS + HPU_MAX_OUTPUTS) * (2 + 2 * HPU_MAX_DIMS) + 8 + 2 * HPU_NN_MAX_INDICES + 16)

/* Room for one more node's words: the per-word pushes then need no check
 * (a check and a possible realloc per word were most of the signature's cost). */
static int reserve_node(hpu_signature_t *s) {
  if (s->cap - s->len >= NODE_WORDS_MAX) return 1;
  size_t cap = s->cap * 2 > s->len + NODE_WORDS_MAX ? s->cap * 2 : s->len + NODE_WORDS_MAX;
  int64_t *grown = realloc(s->words, cap * sizeof *grown);
  if (!grown) return 0;
  s->words = grown;
  s->cap = cap;
  return 1;
}

/* Only after reserve_node for the node being added. */
static inline void push(hpu_signature_t *s, int64_t w) { s->words[s->len++] = w; }

static int same_view(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  if (a->storage != b->storage || a->offset != b->offset || a->dtype != b->dtype ||
      a->ndim != b->ndim)
    return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || a->strides[d] != b->strides[d]) return 0;
  return 1;
}

#define PARTIAL_PRODUCER ((int64_t)1 << 40)

/* The latest earlier node that wrote any byte this view reads, as
 * (node << 3 | output) + 1, with PARTIAL_PRODUCER added when it wrote
 * another view of the storage (a row of a larger output, say); 0 for a
 * tensor from outside the graph. `outs` holds the outputs of the nodes
 * before this one by storage. The latest overlapping writer, not the
 * latest writer of the exact view: an older dead tensor of the same view
 * at an address the allocator reuses in one step and not the next would
 * otherwise become the producer in some steps only. */
static int64_t producer_of(const hpu_node_t *nodes, const hpu_ptrmap_t *outs,
                           const hpu_tensor_t *t) {
  uint64_t lo = (uint64_t)t->offset, hi = hpu_tensor_end_offset(t);
  for (int32_t id = hpu_ptrmap_head(outs, t->storage); id >= 0; id = outs->next[id]) {
    const hpu_tensor_t *o = &nodes[id >> 3].outputs[id & 7];
    if (same_view(o, t)) return (int64_t)id + 1;
    if (hpu_tensor_numel(o) > 0 && hpu_tensor_numel(t) > 0 && (uint64_t)o->offset < hi &&
        hpu_tensor_end_offset(o) > lo)
      return ((int64_t)id + 1) | PARTIAL_PRODUCER;
  }
  return 0;
}

static void push_tensor(hpu_signature_t *s, const hpu_tensor_t *t) {
  push(s, (int64_t)t->dtype << 8 | t->ndim);
  for (int d = 0; d < t->ndim; d++) {
    push(s, t->sizes[d]);
    push(s, t->strides[d]);
  }
}

static void push_scalar_kind(hpu_signature_t *s, hpu_scalar_t v) { push(s, v.kind); }

static void push_params(hpu_signature_t *s, const hpu_node_t *n) {
  const hpu_op_params_t *p = &n->params;
  if (hpu_op_is_pointwise(n->op)) {
    /* Scalar values vary per step (learning rates); which operands are
     * scalars, and their kinds, change the kernel. */
    const hpu_pointwise_params_t *pw = &p->pointwise;
    push(s, pw->scalar_operands);
    for (int i = 0; i < 6; i++) push_scalar_kind(s, pw->s[i]);
    for (int i = 0; i < 4; i++) push(s, pw->i[i]);
    for (int i = 0; i < 3; i++) push_scalar_kind(s, pw->operand[i]);
    return;
  }
  if (hpu_op_is_nn(n->op)) {
    const hpu_nn_params_t *nn = &p->nn;
    for (int i = 0; i < 4; i++) {
      push_scalar_kind(s, nn->s[i]);
      push(s, nn->i[i]);
    }
    for (int i = 0; i < HPU_NN_MAX_INDICES; i++) {
      push(s, nn->sizes[i]);
      push(s, nn->strides[i]);
    }
    return;
  }
  switch (n->op) {
    case HPU_OP_FILL: push_scalar_kind(s, p->fill.value); break;
    case HPU_OP_ADD: case HPU_OP_SUB: case HPU_OP_MUL: case HPU_OP_DIV:
      push_scalar_kind(s, p->binary.alpha);
      push_scalar_kind(s, p->binary.other);
      push(s, p->binary.rounding);
      break;
    case HPU_OP_MATMUL:
      push_scalar_kind(s, p->matmul.alpha);
      push_scalar_kind(s, p->matmul.beta);
      break;
    default: break; /* RNG seed/offset and bounds vary per step */
  }
}


int hpu_signature_build(hpu_signature_t *s, const hpu_node_t *nodes, int n,
                        const uint8_t *dead) {
  memset(s, 0, sizeof *s);
  hpu_ptrmap_t outs;
  if (!hpu_ptrmap_init_outputs(&outs, nodes, n)) return 0;
  s->cap = (size_t)n * 48 + 16; /* a typical node takes 30-60 words */
  s->words = malloc(s->cap * sizeof *s->words);
  int ok = s->words != NULL;
  if (ok) push(s, n);
  for (int i = 0; i < n && ok; i++) {
    const hpu_node_t *node = &nodes[i];
    if (!(ok = reserve_node(s))) break;
    push(s, (int64_t)node->op << 16 | node->num_inputs << 8 | node->num_outputs);
    push(s, (int64_t)node->compute_dtype | (int64_t)(dead ? dead[i] : 0) << 8);
    for (int k = 0; k < node->num_inputs; k++) {
      push(s, producer_of(nodes, &outs, &node->inputs[k]));
      push_tensor(s, &node->inputs[k]);
    }
    for (int k = 0; k < node->num_outputs; k++) {
      push_tensor(s, &node->outputs[k]);
      hpu_ptrmap_push(&outs, node->outputs[k].storage, i << 3 | k);
    }
    push_params(s, node);
  }
  hpu_ptrmap_free(&outs);
  if (!ok) {
    hpu_signature_free(s);
    return 0;
  }
  s->hash = hpu_hash_words(s->words, s->len);
  s->num_nodes = n;
  return 1;
}

void hpu_signature_free(hpu_signature_t *s) {
  free(s->words);
  memset(s, 0, sizeof *s);
}

int hpu_signature_equal(const hpu_signature_t *a, const hpu_signature_t *b) {
  return a->hash == b->hash && a->len == b->len &&
         memcmp(a->words, b->words, a->len * sizeof(int64_t)) == 0;
}

/* Walks both signatures node by node; the header word of a node holds its
 * op and operand counts, so the first difference is found without parsing
 * the rest. */
static size_t param_words(hpu_op_t op) {
  if (hpu_op_is_pointwise(op)) return 1 + 6 + 4 + 3;
  if (hpu_op_is_nn(op)) return 8 + 2 * HPU_NN_MAX_INDICES;
  switch (op) {
    case HPU_OP_FILL: return 1;
    case HPU_OP_ADD: case HPU_OP_SUB: case HPU_OP_MUL: case HPU_OP_DIV: return 3;
    case HPU_OP_MATMUL: return 2;
    default: return 0;
  }
}

static size_t node_words(const int64_t *w) {
  int nin = (int)(w[0] >> 8 & 0xff), nout = (int)(w[0] & 0xff);
  size_t k = 2;
  for (int i = 0; i < nin; i++) k += 1 + 1 + 2 * (size_t)(w[k + 1] & 0xff);
  for (int i = 0; i < nout; i++) k += 1 + 2 * (size_t)(w[k] & 0xff);
  return k + param_words((hpu_op_t)(w[0] >> 16));
}

static void shape_text(const int64_t *t, char *buf, size_t len) {
  int nd = (int)(*t & 0xff);
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < nd && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld", (long long)t[1 + 2 * d]);
  if (used < len) snprintf(buf + used, len - used, "]");
}

void hpu_signature_explain(const hpu_signature_t *prev, const hpu_signature_t *cur,
                           const hpu_node_t *nodes, char *buf, size_t len) {
  if (!prev || prev->len == 0) {
    snprintf(buf, len, "first graph on this card (%d nodes)", cur->num_nodes);
    return;
  }
  size_t a = 1, b = 1;
  for (int i = 0; i < cur->num_nodes; i++) {
    if (i >= prev->num_nodes || a >= prev->len) {
      snprintf(buf, len, "the graph grew from %d to %d nodes (new node %d: %s)", prev->num_nodes,
               cur->num_nodes, i, hpu_op_name(nodes[i].op));
      return;
    }
    const int64_t *pw = prev->words + a, *cw = cur->words + b;
    size_t pn = node_words(pw), cn = node_words(cw);
    if (pw[0] != cw[0]) {
      snprintf(buf, len, "node %d is %s, was %s: the op sequence changed", i,
               hpu_op_name(nodes[i].op), hpu_op_name((hpu_op_t)(pw[0] >> 16)));
      return;
    }
    if (pn != cn || memcmp(pw, cw, cn * sizeof(int64_t)) != 0) {
      /* Same op: find the operand whose shape (or layout/dtype) changed. */
      const hpu_node_t *n = &nodes[i];
      size_t k = 2;
      for (int op_i = 0; op_i < n->num_inputs + n->num_outputs; op_i++) {
        int is_in = op_i < n->num_inputs;
        if (is_in) {
          if (pw[k] != cw[k]) {
            snprintf(buf, len, "node %d (%s): input %d now comes from %s", i, hpu_op_name(n->op),
                     op_i, cw[k] ? "another node of the graph" : "outside the graph");
            return;
          }
          k += 1;
        }
        size_t tw = 1 + 2 * (size_t)(cw[k] & 0xff);
        size_t ptw = 1 + 2 * (size_t)(pw[k] & 0xff);
        if (tw != ptw || memcmp(pw + k, cw + k, tw * sizeof(int64_t)) != 0) {
          char was[256], now[256];
          shape_text(pw + k, was, sizeof was);
          shape_text(cw + k, now, sizeof now);
          snprintf(buf, len, "node %d (%s): %s %d changed from %s to %s%s", i, hpu_op_name(n->op),
                   is_in ? "input" : "output", is_in ? op_i : op_i - n->num_inputs, was, now,
                   strcmp(was, now) == 0 ? " (same shape: strides, dtype or producer differ)" : "");
          return;
        }
        k += tw;
      }
      if (pw[1] != cw[1]) {
        if ((pw[1] & 0xff) != (cw[1] & 0xff))
          snprintf(buf, len, "node %d (%s): compute dtype changed", i, hpu_op_name(n->op));
        else
          snprintf(buf, len,
                   "node %d (%s): its output is %s after the graph (the program %s the tensor)", i,
                   hpu_op_name(n->op), (cw[1] >> 8) ? "dead" : "live",
                   (cw[1] >> 8) ? "no longer holds" : "now holds");
        return;
      }
      size_t pk = k;
      while (pk < cn && pw[pk] == cw[pk]) pk++;
      snprintf(buf, len, "node %d (%s): kernel parameter word %zu changed from %lld to %lld", i,
               hpu_op_name(n->op), pk - k, (long long)pw[pk], (long long)cw[pk]);
      return;
    }
    a += pn;
    b += cn;
  }
  if (prev->num_nodes != cur->num_nodes)
    snprintf(buf, len, "the graph shrank from %d to %d nodes", prev->num_nodes, cur->num_nodes);
  else
    snprintf(buf, len, "same structure as the previous graph, evicted from the recipe cache");
}
