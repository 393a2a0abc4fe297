/* Elementwise fusion, planning: which runs of nodes fuse into a group,
 * which row op ends a group, which intermediates need never reach memory,
 * and the check of a plan read back from disk. fusion_exec.c runs the
 * groups; graph/fusion_plan.h is the plan between them. */
#include "graph/fusion_plan.h"
#include "graph/fusion_tiling.h"

#include "graph/ptrmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/memory.h"
#include "kernels/pw_tile.h"

/* ---- what fuses ---- */

static int is_float_dtype(hpu_dtype_t d) {
  return d == HPU_FLOAT32 || d == HPU_BFLOAT16 || d == HPU_FLOAT16;
}

static int contiguous_numel(const hpu_tensor_t *t, int64_t *numel) {
  *numel = hpu_tensor_numel(t);
  return hpu_tensor_is_contiguous(t);
}

/* The eager kernels' typed float paths: every operand in the compute dtype.
 * The four arithmetic ops and relu (binary.c) have their loops here; the
 * pointwise family runs its own kernels on our tiles (kernels/pw_tile.h). */
static int binary_fusible(const hpu_node_t *nd) {
  switch (nd->op) {
    case HPU_OP_ADD: case HPU_OP_SUB: case HPU_OP_MUL: case HPU_OP_RELU: break;
    case HPU_OP_DIV: if (nd->params.binary.rounding != HPU_ROUND_NONE) return 0; break;
    default: return 0;
  }
  if (nd->num_outputs != 1) return 0;
  hpu_dtype_t c = nd->compute_dtype;
  if (!is_float_dtype(c) || nd->outputs[0].dtype != c) return 0;
  for (int k = 0; k < nd->num_inputs; k++)
    if (nd->inputs[k].dtype != c) return 0;
  return 1;
}

/* An operand that broadcasts into out under PyTorch's rules (dims aligned
 * on the right, each of out's size or 1), such as an attention mask
 * [B,1,1,S] added to scores [B,H,S,S]. It must be contiguous in its own
 * shape, so that its bytes are [data, data + numel) for the overlap checks;
 * the executor reads it with stride 0 in the broadcast dims. The math per
 * element is that of the eager kernel, which broadcasts the same way. */
static int broadcasts_into(const hpu_tensor_t *in, const hpu_tensor_t *out) {
  if (in->ndim > out->ndim || !hpu_tensor_is_contiguous(in)) return 0;
  for (int d = 1; d <= in->ndim; d++) {
    int64_t s = in->sizes[in->ndim - d];
    if (s != 1 && s != out->sizes[out->ndim - d]) return 0;
  }
  return 1;
}

int hpu_plan_node_fusible(const hpu_node_t *nd) {
  if (!binary_fusible(nd) && !(hpu_op_is_pointwise(nd->op) && hpu_pw_tile_supported(nd)))
    return 0;
  int64_t n;
  if (!contiguous_numel(&nd->outputs[0], &n) || n == 0) return 0;
  for (int k = 0; k < nd->num_inputs; k++) {
    int64_t m;
    const hpu_tensor_t *in = &nd->inputs[k];
    if (hpu_tensor_numel(in) == 1) continue; /* a scalar, broadcast */
    if (!contiguous_numel(in, &m) || m != n)
      if (!broadcasts_into(in, &nd->outputs[0])) return 0;
  }
  return 1;
}

/* Whether contiguous view `w`, written whole, overwrites every byte of `t`. */
static int covers(const hpu_tensor_t *w, const hpu_tensor_t *t) {
  if (w->storage != t->storage || !hpu_tensor_is_contiguous(w)) return 0;
  return w->offset <= t->offset && hpu_tensor_end_offset(w) >= hpu_tensor_end_offset(t);
}

/* By the bytes the views span: a strided view, such as a slice read by a
 * node after the group, spans more than numel elements. */
static int overlaps(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  uintptr_t alo, ahi, blo, bhi;
  hpu_tensor_byte_range(a, &alo, &ahi);
  hpu_tensor_byte_range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

static int same_view(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  return hpu_tensor_data(a) == hpu_tensor_data(b) && a->dtype == b->dtype &&
         hpu_tensor_numel(a) == hpu_tensor_numel(b);
}

/* Whether each fusible node's output buffer is still held by someone
 * (by a tensor at least as large as the output reaches: one reallocated
 * to a smaller tensor is not the output's any more): live[i] = 1 for the
 * others. Asked of the allocator in one call, since a step's graph has
 * hundreds of nodes and this runs on every cache hit. */
static void fusible_liveness(const hpu_node_t *nodes, int n, const uint8_t *fusible, uint8_t *live) {
  const void **ptrs = malloc((size_t)(n > 0 ? n : 1) * sizeof *ptrs);
  uint64_t *needed = malloc((size_t)(n > 0 ? n : 1) * sizeof *needed);
  int *which = malloc((size_t)(n > 0 ? n : 1) * sizeof *which);
  uint8_t *answer = malloc((size_t)(n > 0 ? n : 1));
  int m = 0;
  for (int i = 0; i < n; i++) {
    live[i] = 1;
    if (!fusible[i]) continue;
    if (ptrs && needed && which && answer) {
      ptrs[m] = nodes[i].outputs[0].storage;
      needed[m] = hpu_tensor_end_offset(&nodes[i].outputs[0]);
      which[m++] = i;
    } else { /* host OOM: one query each */
      live[i] = (uint8_t)hpu_memory_is_allocated(nodes[i].outputs[0].storage);
    }
  }
  if (m) hpu_memory_are_held(ptrs, needed, m, answer);
  for (int k = 0; k < m; k++) live[which[k]] = answer[k];
  free(ptrs);
  free(needed);
  free(which);
  free(answer);
}

void hpu_graph_dead_outputs(const hpu_node_t *nodes, int n, uint8_t *dead) {
  /* Only fusible nodes' liveness changes a plan; leaving the others out
   * keeps allocator address reuse (which varies from step to step) out of
   * the graph signature. Fusibility is decided once per node here. */
  uint8_t *fusible = malloc((size_t)(n > 0 ? n : 1));
  if (!fusible) { /* host OOM: nothing is dead, the plan keeps every output */
    memset(dead, 0, (size_t)n);
    return;
  }
  for (int i = 0; i < n; i++) fusible[i] = (uint8_t)hpu_plan_node_fusible(&nodes[i]);
  fusible_liveness(nodes, n, fusible, dead); /* dead[] holds liveness for now */
  /* Backwards, with the outputs of the later nodes indexed by storage: an
   * output is dead when its buffer is freed, or when a later node
   * overwrites all of it (a pure temporary). Any later output covering it
   * counts, not only the same view: the caching allocator hands a freed
   * block to another tensor of the graph in one step and not in the next,
   * and a dead flag that followed the reuse changed the graph's signature
   * (a recompilation) from step to step. */
  hpu_ptrmap_t later;
  int indexed = hpu_ptrmap_init_outputs(&later, nodes, n);
  for (int i = n - 1; i >= 0; i--) {
    const hpu_tensor_t *out = &nodes[i].outputs[0];
    int d = 0;
    if (fusible[i]) {
      d = !dead[i];
      if (!d && hpu_tensor_is_contiguous(out)) {
        if (indexed) {
          for (int32_t id = hpu_ptrmap_head(&later, out->storage); id >= 0 && !d; id = later.next[id])
            d = covers(&nodes[id >> 3].outputs[id & 7], out);
        } else { /* host OOM: the slow scan */
          for (int j = i + 1; j < n && !d; j++)
            for (int o = 0; o < nodes[j].num_outputs && !d; o++)
              d = covers(&nodes[j].outputs[o], out);
        }
      }
    }
    dead[i] = (uint8_t)d;
    if (indexed)
      for (int o = 0; o < nodes[i].num_outputs; o++)
        hpu_ptrmap_push(&later, nodes[i].outputs[o].storage, i << 3 | o);
  }
  hpu_ptrmap_free(&later);
  free(fusible);
}

/* Whether view `t` lies inside one of the contiguous views `w` (written
 * after the value in question, so `t` reads their data). */
static int inside_any(const hpu_tensor_t *t, const hpu_tensor_t *const *w, int nw) {
  for (int i = 0; i < nw; i++)
    if (covers(w[i], t)) return 1;
  return 0;
}

/* Is the output of node i read by a node outside [gfirst, gend) before a
 * later node overwrites all of it? A read inside a later contiguous write
 * into its bytes does not count: it reads that write's data (a block the
 * allocator gave to another, smaller tensor of the graph, in some steps
 * only). */
static int read_outside(const hpu_node_t *nodes, int n, int i, int gfirst, int gend) {
  enum { MAX_WRITES = 8 };
  const hpu_tensor_t *out = &nodes[i].outputs[0];
  const hpu_tensor_t *written[MAX_WRITES];
  int nw = 0;
  for (int j = i + 1; j < n; j++) {
    if (j < gfirst || j >= gend)
      for (int k = 0; k < nodes[j].num_inputs; k++)
        if (overlaps(&nodes[j].inputs[k], out) && !inside_any(&nodes[j].inputs[k], written, nw)) return 1;
    for (int o = 0; o < nodes[j].num_outputs; o++) {
      const hpu_tensor_t *w = &nodes[j].outputs[o];
      if (same_view(w, out) || covers(w, out)) return 0;
      if (nw < MAX_WRITES && hpu_tensor_is_contiguous(w) && overlaps(w, out)) written[nw++] = w;
    }
  }
  return 0;
}

/* Adds node j to the group [first, j) if every memory access stays at the
 * same element index: an operand may overlap a member's output only as the
 * exact same view. Fills src[] for j. */
static int admit(const hpu_node_t *nodes, hpu_fused_group_t *g, int j) {
  int m = j - g->first;
  const hpu_node_t *nd = &nodes[j];
  for (int k = 0; k < nd->num_inputs; k++) {
    const hpu_tensor_t *in = &nd->inputs[k];
    g->src[m][k] = -1;
    if (hpu_tensor_numel(in) != g->numel) {
      /* a broadcast scalar or operand read at run time, each element for
       * many output elements: must not be written in the group */
      for (int p = 0; p <= m; p++)
        if (overlaps(in, &nodes[g->first + p].outputs[0])) return 0;
      continue;
    }
    for (int p = m - 1; p >= 0; p--) {
      const hpu_tensor_t *o = &nodes[g->first + p].outputs[0];
      if (!overlaps(in, o)) continue;
      if (!same_view(in, o)) return 0;
      g->src[m][k] = (int8_t)p;
      break;
    }
  }
  /* j's output against every earlier member's memory operands and outputs */
  const hpu_tensor_t *out = &nd->outputs[0];
  for (int p = 0; p < m; p++) {
    const hpu_node_t *q = &nodes[g->first + p];
    if (overlaps(out, &q->outputs[0]) && !same_view(out, &q->outputs[0])) return 0;
    for (int k = 0; k < q->num_inputs; k++) {
      const hpu_tensor_t *in = &q->inputs[k];
      if (overlaps(out, in) && (hpu_tensor_numel(in) != g->numel || !same_view(out, in))) return 0;
    }
  }
  for (int k = 0; k < nd->num_inputs; k++)
    if (g->src[m][k] < 0 && overlaps(out, &nd->inputs[k]) && !same_view(out, &nd->inputs[k]))
      return 0;
  return 1;
}

/* sum / mean / var / std over the innermost non-trivial dim: the row
 * length, or 0. Outputs (the reduction, var_mean's mean) are float, one
 * element per row, contiguous. */
static int64_t reduce_row_len(const hpu_node_t *nd) {
  const hpu_tensor_t *in = &nd->inputs[0];
  int64_t kind = nd->params.nn.i[0];
  uint64_t mask = (uint64_t)nd->params.nn.i[1];
  if (kind != HPU_REDUCE_SUM && kind != HPU_REDUCE_MEAN && kind != HPU_REDUCE_VAR &&
      kind != HPU_REDUCE_STD)
    return 0;
  if (nd->num_outputs != 1 && !(nd->num_outputs == 2 && kind >= HPU_REDUCE_VAR)) return 0;
  int last = in->ndim - 1;
  while (last >= 0 && in->sizes[last] == 1) last--;
  if (last < 0) return 0;
  for (int d = 0; d < in->ndim; d++)
    if (in->sizes[d] != 1 && (int)((mask >> d) & 1) != (d == last)) return 0;
  int64_t len = in->sizes[last];
  if (len >= HPU_FUSION_REDUCE_MAX_LEN) return 0;   /* fusion_tiling.h */
  for (int o = 0; o < nd->num_outputs; o++) {
    const hpu_tensor_t *out = &nd->outputs[o];
    if (!is_float_dtype(out->dtype) || !hpu_tensor_is_contiguous(out) ||
        hpu_tensor_numel(out) * len != hpu_tensor_numel(in))
      return 0;
  }
  return len;
}

/* The row length of a row op that may end a group, or 0: softmax /
 * log_softmax over the innermost non-trivial dim, layer_norm, or sum / mean
 * / var / std over the last dim, on contiguous float operands (their eager
 * kernels treat rows independently, so running them a block of rows at a
 * time gives the same bits). */
static int64_t row_op_len(const hpu_node_t *nd) {
  const hpu_tensor_t *in = &nd->inputs[0], *out = &nd->outputs[0];
  if (!is_float_dtype(in->dtype) || !is_float_dtype(out->dtype) || in->ndim == 0) return 0;
  if (!hpu_tensor_is_contiguous(in) || !hpu_tensor_is_contiguous(out)) return 0;
  if (nd->op == HPU_OP_REDUCE) return reduce_row_len(nd);
  if (nd->op == HPU_OP_SOFTMAX) {
    int64_t dim = nd->params.nn.i[0];
    if (dim < 0 || dim >= in->ndim) return 0;
    for (int d = (int)dim + 1; d < in->ndim; d++)
      if (in->sizes[d] != 1) return 0;
    return in->sizes[dim];
  }
  if (nd->op == HPU_OP_LAYER_NORM) {
    if (in->ndim != 2 || nd->num_outputs != 3) return 0;
    for (int k = 1; k < 3; k++)
      if (!hpu_tensor_is_contiguous(&nd->outputs[k]) || hpu_tensor_numel(&nd->outputs[k]) != in->sizes[0])
        return 0;
    return in->sizes[1];
  }
  return 0;
}

/* May node j (a row op) end group g? Its input must be exactly a member's
 * output. Its main output covers the same elements as the members, block by
 * block after them, so it may reuse a member's operand or output only as the
 * exact same view (each element is read before it is overwritten); nothing
 * else it touches may overlap the members' memory. Sets rows_node, feeder
 * and row_len. */
static int admit_rows(const hpu_node_t *nodes, hpu_fused_group_t *g, int j) {
  const hpu_node_t *nd = &nodes[j];
  int64_t len = row_op_len(nd);
  if (len <= 0 || hpu_tensor_numel(&nd->inputs[0]) != g->numel || g->numel % len) return 0;
  int feeder = -1;
  for (int p = g->count - 1; p >= 0 && feeder < 0; p--)
    if (overlaps(&nd->inputs[0], &nodes[g->first + p].outputs[0])) {
      if (!same_view(&nd->inputs[0], &nodes[g->first + p].outputs[0])) return 0;
      feeder = p;
    }
  if (feeder < 0) return 0;
  /* A reduction's outputs (one element per row) are staged and written
   * after the whole group (run_group), as eager mode writes them after its
   * producers: they may then reuse any of the members' memory, as they often
   * do (the allocator hands a freed temporary's block to the sum). */
  int staged = nd->op == HPU_OP_REDUCE;
  for (int p = 0; p < g->count && !staged; p++) {
    const hpu_node_t *q = &nodes[g->first + p];
    for (int k = 1; k < nd->num_inputs; k++)
      if (overlaps(&nd->inputs[k], &q->outputs[0])) return 0;
    for (int o = 0; o < nd->num_outputs; o++) {
      const hpu_tensor_t *out = &nd->outputs[o];
      if (overlaps(out, &q->outputs[0]) && (o > 0 || !same_view(out, &q->outputs[0]))) return 0;
      for (int k = 0; k < q->num_inputs; k++) {
        const hpu_tensor_t *in = &q->inputs[k];
        if (overlaps(out, in) && (o > 0 || hpu_tensor_numel(in) == 1 || !same_view(out, in))) return 0;
      }
    }
  }
  /* The row op reads a copy of input 0, its other inputs from memory. */
  for (int o = 0; o < nd->num_outputs && !staged; o++)
    for (int k = 0; k < nd->num_inputs; k++)
      if (overlaps(&nd->outputs[o], &nd->inputs[k]) && (o > 0 || k > 0 || !same_view(&nd->outputs[o], &nd->inputs[k])))
        return 0;
  g->rows_node = j;
  g->feeder = feeder;
  g->row_len = len;
  return 1;
}

/* The group the planner forms at node i (which must be fusible): members
 * while they are fusible, of the first one's numel and admitted, up to
 * HPU_FUSION_MAX_GROUP, then a row op if one may end it; which members'
 * outputs are stored. Returns the nodes it spans (members + row op), or 0
 * when none forms (fewer than two members and no row op). *next is where
 * the planner looks for the next group. Both hpu_plan_build and
 * hpu_plan_check decide with this, so a plan is only ever accepted by the
 * tests that made it. */
static int form_group(const hpu_node_t *nodes, int n, const uint8_t *dead, int i,
                      hpu_fused_group_t *g, int *next) {
  memset(g, 0, sizeof *g);
  g->first = i;
  g->numel = hpu_tensor_numel(&nodes[i].outputs[0]);
  g->rows_node = -1;
  int j = i;
  while (j < n && j - i < HPU_FUSION_MAX_GROUP && hpu_plan_node_fusible(&nodes[j]) &&
         hpu_tensor_numel(&nodes[j].outputs[0]) == g->numel && admit(nodes, g, j))
    j++;
  g->count = j - i;
  int rows = g->count >= 1 && j < n && admit_rows(nodes, g, j);
  if (g->count < 2 && !rows) {
    *next = j > i ? j : i + 1;
    return 0;
  }
  int end = j + rows; /* the row op reads inside the group */
  for (int m = 0; m < g->count; m++) {
    int node = i + m;
    g->store[m] = (uint8_t)(!dead[node] || read_outside(nodes, n, node, i, end));
  }
  *next = end;
  return end - i;
}

static void count_group(hpu_plan_t *plan, const hpu_fused_group_t *g) {
  plan->fused_nodes += g->count + (g->rows_node >= 0);
  for (int m = 0; m < g->count; m++) plan->dropped_stores += !g->store[m];
}

hpu_plan_t *hpu_plan_build(const hpu_node_t *nodes, int n, const uint8_t *dead) {
  hpu_plan_t *plan = calloc(1, sizeof *plan);
  if (!plan) return NULL;
  plan->num_nodes = n;
  plan->group_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *plan->group_of);
  plan->groups = malloc((size_t)(n / 2 + 1) * sizeof *plan->groups);
  if (!plan->group_of || !plan->groups) {
    hpu_plan_free(plan);
    return NULL;
  }
  for (int i = 0; i < n; i++) plan->group_of[i] = -1;
  for (int i = 0; i < n;) {
    if (!hpu_plan_node_fusible(&nodes[i])) {
      i++;
      continue;
    }
    hpu_fused_group_t *g = &plan->groups[plan->num_groups];
    int next, span = form_group(nodes, n, dead, i, g, &next);
    for (int k = 0; k < span; k++) plan->group_of[i + k] = plan->num_groups;
    if (span) {
      count_group(plan, g);
      plan->num_groups++;
    }
    i = next;
  }
  if (plan->num_groups == 0) {
    hpu_plan_free(plan);
    return NULL;
  }
  /* Room was made for n / 2 + 1 groups; the recipe cache keeps the plan. */
  hpu_fused_group_t *fit = realloc(plan->groups, (size_t)plan->num_groups * sizeof *plan->groups);
  if (fit) plan->groups = fit;
  return plan;
}

static int refuse(char *why, size_t len, const char *fmt, int a, int b) {
  snprintf(why, len, fmt, a, b);
  return 0;
}

int hpu_plan_check(const hpu_plan_t *p, const hpu_node_t *nodes, int n, const uint8_t *dead,
                   char *why, size_t len) {
  if (p->num_nodes != n) return refuse(why, len, "plan of %d nodes for a graph of %d", p->num_nodes, n);
  if (p->num_groups < 1 || p->num_groups > n)
    return refuse(why, len, "%d groups in a graph of %d nodes", p->num_groups, n);
  hpu_plan_t counts = {0};
  int node = 0; /* nodes before it are checked */
  for (int gi = 0; gi < p->num_groups; gi++) {
    const hpu_fused_group_t *s = &p->groups[gi];
    /* Bounds first: form_group indexes nodes with them. */
    if (s->first < node || s->first >= n)
      return refuse(why, len, "group %d starts at node %d, out of order or outside the graph", gi, s->first);
    for (; node < s->first; node++)
      if (p->group_of[node] != -1)
        return refuse(why, len, "node %d is in group %d but in no group's range", node, p->group_of[node]);
    if (!hpu_plan_node_fusible(&nodes[s->first]))
      return refuse(why, len, "group %d starts at node %d, which does not fuse", gi, s->first);
    hpu_fused_group_t t;
    int next, span = form_group(nodes, n, dead, s->first, &t, &next);
    if (!span) return refuse(why, len, "no group forms at node %d (group %d)", s->first, gi);
    if (s->count != t.count || s->rows_node != t.rows_node)
      return refuse(why, len, "group %d: members or row op differ from the graph's (node %d)", gi, s->first);
    if (s->numel != t.numel || s->feeder != t.feeder || s->row_len != t.row_len)
      return refuse(why, len, "group %d: element count or row length differs from the graph's (node %d)",
                    gi, s->first);
    if (memcmp(s->src, t.src, sizeof t.src) != 0)
      return refuse(why, len, "group %d: operand sources differ from the graph's (node %d)", gi, s->first);
    if (memcmp(s->store, t.store, sizeof t.store) != 0)
      return refuse(why, len, "group %d: stored outputs differ from the graph's (node %d)", gi, s->first);
    for (; node < s->first + span; node++)
      if (p->group_of[node] != gi)
        return refuse(why, len, "node %d of group %d is marked as in another group", node, gi);
    count_group(&counts, &t);
  }
  for (; node < n; node++)
    if (p->group_of[node] != -1)
      return refuse(why, len, "node %d is in group %d but in no group's range", node, p->group_of[node]);
  if (p->fused_nodes != counts.fused_nodes || p->dropped_stores != counts.dropped_stores)
    return refuse(why, len, "counts of fused nodes (%d) or dropped stores (%d) are wrong", p->fused_nodes,
                  p->dropped_stores);
  return 1;
}

hpu_plan_t *hpu_plan_copy(const hpu_plan_t *p) {
  hpu_plan_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  *c = *p;
  c->group_of = malloc((size_t)(p->num_nodes > 0 ? p->num_nodes : 1) * sizeof *c->group_of);
  c->groups = malloc((size_t)(p->num_groups > 0 ? p->num_groups : 1) * sizeof *c->groups);
  if (!c->group_of || !c->groups) {
    hpu_plan_free(c);
    return NULL;
  }
  memcpy(c->group_of, p->group_of, (size_t)p->num_nodes * sizeof *c->group_of);
  memcpy(c->groups, p->groups, (size_t)p->num_groups * sizeof *c->groups);
  return c;
}

void hpu_plan_free(hpu_plan_t *plan) {
  if (!plan) return;
  free(plan->group_of);
  free(plan->groups);
  free(plan);
}
