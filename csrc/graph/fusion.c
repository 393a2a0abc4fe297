/* Elementwise fusion: planning (which runs of nodes fuse, which
 * intermediates stay in cache) and the tiled executor. Fused results are
 * bitwise equal to running the nodes one by one: each member computes in
 * float exactly as its eager kernel does and rounds to its output dtype. */
#include "graph/fusion.h"

#include "graph/ptrmap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/memory.h"
#include "hpu/parallel.h"
#include "kernels/bytes.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/pw_tile.h"

#define TILE 512
#define PITCH (TILE + 80) /* floats from one tile to the next: see run_tiles */

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

/* The bytes a view spans (strides are >= 0): a strided view, such as a
 * slice read by a node after the group, spans more than numel elements. */
static void byte_range(const hpu_tensor_t *t, uintptr_t *lo, uintptr_t *hi) {
  *lo = (uintptr_t)hpu_tensor_data(t);
  if (hpu_tensor_numel(t) == 0) {
    *hi = *lo;
    return;
  }
  int64_t last = 0;
  for (int d = 0; d < t->ndim; d++) last += (t->sizes[d] - 1) * t->strides[d];
  *hi = *lo + (uintptr_t)(last + 1) * hpu_dtype_size(t->dtype);
}

static int overlaps(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  uintptr_t alo, ahi, blo, bhi;
  byte_range(a, &alo, &ahi);
  byte_range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

static int same_view(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  return hpu_tensor_data(a) == hpu_tensor_data(b) && a->dtype == b->dtype &&
         hpu_tensor_numel(a) == hpu_tensor_numel(b);
}

/* Whether each fusible node's output buffer is still held by someone:
 * live[i] = 1 for the others. Asked of the allocator in one call, since a
 * step's graph has hundreds of nodes and this runs on every cache hit. */
static void fusible_liveness(const hpu_node_t *nodes, int n, const uint8_t *fusible, uint8_t *live) {
  const void **ptrs = malloc((size_t)(n > 0 ? n : 1) * sizeof *ptrs);
  int *which = malloc((size_t)(n > 0 ? n : 1) * sizeof *which);
  uint8_t *answer = malloc((size_t)(n > 0 ? n : 1));
  int m = 0;
  for (int i = 0; i < n; i++) {
    live[i] = 1;
    if (!fusible[i]) continue;
    if (ptrs && which && answer) {
      ptrs[m] = nodes[i].outputs[0].storage;
      which[m++] = i;
    } else { /* host OOM: one query each */
      live[i] = (uint8_t)hpu_memory_is_allocated(nodes[i].outputs[0].storage);
    }
  }
  if (m) hpu_memory_are_allocated(ptrs, m, answer);
  for (int k = 0; k < m; k++) live[which[k]] = answer[k];
  free(ptrs);
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
  /* Backwards, with the outputs of the later nodes indexed by address: an
   * output is dead when its buffer is freed, or when a later node
   * overwrites exactly this view (a pure temporary). */
  hpu_ptrmap_t later;
  int indexed = hpu_ptrmap_init_outputs(&later, nodes, n);
  for (int i = n - 1; i >= 0; i--) {
    const hpu_tensor_t *out = &nodes[i].outputs[0];
    int d = 0;
    if (fusible[i]) {
      d = !dead[i];
      if (!d && hpu_tensor_is_contiguous(out)) {
        if (indexed) {
          for (int32_t id = hpu_ptrmap_head(&later, hpu_tensor_data(out)); id >= 0 && !d;
               id = later.next[id])
            d = same_view(&nodes[id >> 3].outputs[id & 7], out);
        } else { /* host OOM: the slow scan */
          for (int j = i + 1; j < n && !d; j++)
            for (int o = 0; o < nodes[j].num_outputs && !d; o++)
              d = same_view(&nodes[j].outputs[o], out);
        }
      }
    }
    dead[i] = (uint8_t)d;
    if (indexed)
      for (int o = 0; o < nodes[i].num_outputs; o++)
        hpu_ptrmap_push(&later, hpu_tensor_data(&nodes[i].outputs[o]), i << 3 | o);
  }
  hpu_ptrmap_free(&later);
  free(fusible);
}

/* Is the output of node i read by a node outside [gfirst, gend) before a
 * later node overwrites that same view? */
static int read_outside(const hpu_node_t *nodes, int n, int i, int gfirst, int gend) {
  const hpu_tensor_t *out = &nodes[i].outputs[0];
  for (int j = i + 1; j < n; j++) {
    if (j < gfirst || j >= gend)
      for (int k = 0; k < nodes[j].num_inputs; k++)
        if (overlaps(&nodes[j].inputs[k], out)) return 1;
    for (int o = 0; o < nodes[j].num_outputs; o++)
      if (same_view(&nodes[j].outputs[o], out)) return 0;
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

/* The reduce kernel (kernels/nn_reduce.c) splits one output's reduction
 * over threads, in a different summation order, when there are fewer
 * outputs than threads and at least this many elements per output; a block
 * of rows must take the same path as the whole tensor, so longer rows do
 * not fuse. */
#define REDUCE_SPLIT_ELEMS 131072

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
  if (len >= REDUCE_SPLIT_ELEMS) return 0;
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

/* ---- the tiled executor ---- */

typedef enum { F_ADD, F_ADDA, F_MUL, F_DIV, F_RELU, F_PW } fop_t;

/* A broadcast memory operand as seen from its member's output: the output's
 * dims (innermost first, size-1 dims dropped, neighbours merged when the
 * operand's strides allow) with the operand's element strides, 0 where it
 * broadcasts. nd = 0: not broadcast. */
typedef struct bcast {
  int nd;
  int64_t size[HPU_MAX_DIMS], stride[HPU_MAX_DIMS];
} bcast_t;

typedef struct member {
  fop_t op;
  hpu_dtype_t dt;        /* compute = input = output dtype */
  float alpha;
  int b_scalar;          /* second operand is a broadcast scalar */
  float b;               /* its value */
  int a_scalar;          /* first operand is a broadcast scalar */
  float a;
  const char *in[HPU_MAX_INPUTS]; /* memory operands (element 0) */
  char *out;
  hpu_pw_tile_t pw;      /* F_PW: the pointwise kernel */
  bcast_t bc[HPU_MAX_INPUTS];
} member_t;

typedef void (*member_math_fn)(fop_t op, int len, float *restrict o, const float *restrict a,
                               const float *restrict b, float a_s, float b_s, float al);

typedef struct group_run {
  const hpu_fused_group_t *g;
  const hpu_node_t *nodes;
  member_math_fn math;
  member_t m[HPU_FUSION_MAX_GROUP];
} group_run_t;

/* The scalar conventions of csrc/kernels/binary.c: alpha and a scalar
 * operand are rounded to the compute dtype, except MUL/DIV in bf16/fp16,
 * which keep float precision (PyTorch CPU's opmath scalar). */
static float scalar_operand(const hpu_node_t *nd, float v) {
  int opmath = (nd->op == HPU_OP_MUL || nd->op == HPU_OP_DIV) &&
               (nd->compute_dtype == HPU_BFLOAT16 || nd->compute_dtype == HPU_FLOAT16);
  return opmath ? v : hpu_round_to(v, nd->compute_dtype);
}

static void prepare_bcast(bcast_t *bc, const hpu_tensor_t *in, const hpu_tensor_t *out) {
  int lead = out->ndim - in->ndim;
  bc->nd = 0;
  for (int d = out->ndim - 1; d >= 0; d--) {
    int64_t size = out->sizes[d];
    if (size == 1) continue;
    int64_t st = d >= lead && in->sizes[d - lead] != 1 ? in->strides[d - lead] : 0;
    int n = bc->nd;
    if (n > 0 && st == bc->stride[n - 1] * bc->size[n - 1]) {
      bc->size[n - 1] *= size; /* continues the inner dim (or both broadcast) */
    } else {
      bc->size[n] = size;
      bc->stride[n] = st;
      bc->nd++;
    }
  }
}

static void prepare_member(member_t *mb, const hpu_node_t *nd, int64_t numel) {
  memset(mb, 0, sizeof *mb);
  mb->dt = nd->compute_dtype;
  mb->out = hpu_tensor_data(&nd->outputs[0]);
  for (int k = 0; k < nd->num_inputs; k++) {
    int64_t in_numel = hpu_tensor_numel(&nd->inputs[k]);
    if (in_numel != 1 && in_numel != numel) prepare_bcast(&mb->bc[k], &nd->inputs[k], &nd->outputs[0]);
  }
  if (hpu_op_is_pointwise(nd->op)) {
    mb->op = F_PW;
    hpu_pw_tile_prepare(nd, &mb->pw);
    for (int k = 0; k < nd->num_inputs; k++) mb->in[k] = hpu_tensor_data(&nd->inputs[k]);
    return;
  }
  mb->in[0] = hpu_tensor_data(&nd->inputs[0]);
  if (numel != 1 && hpu_tensor_numel(&nd->inputs[0]) == 1) {
    mb->a_scalar = 1;
    mb->a = hpu_load_f32(mb->in[0], nd->inputs[0].dtype);
  }
  switch (nd->op) {
    case HPU_OP_RELU: mb->op = F_RELU; return;
    case HPU_OP_MUL: mb->op = F_MUL; break;
    case HPU_OP_DIV: mb->op = F_DIV; break;
    default: {
      hpu_scalar_t al = nd->params.binary.alpha;
      float a = al.kind == HPU_SCALAR_FLOAT ? (float)al.f : (float)al.i;
      a = hpu_round_to(a, nd->compute_dtype);
      if (nd->op == HPU_OP_SUB) a = -a;
      mb->alpha = a;
      mb->op = a == 1.0f ? F_ADD : F_ADDA;
      break;
    }
  }
  if (nd->num_inputs == 1) {
    hpu_scalar_t s = nd->params.binary.other;
    mb->b_scalar = 1;
    mb->b = scalar_operand(nd, s.kind == HPU_SCALAR_FLOAT ? (float)s.f : (float)s.i);
  } else {
    mb->in[1] = hpu_tensor_data(&nd->inputs[1]);
    if (numel != 1 && hpu_tensor_numel(&nd->inputs[1]) == 1) {
      mb->b_scalar = 1;
      mb->b = scalar_operand(nd, hpu_load_f32(mb->in[1], nd->inputs[1].dtype));
    }
  }
}

/* Output elements [start, start + len) of a broadcast operand at p, as
 * floats: runs along the innermost dim, then an odometer step. */
static const float *gather(const bcast_t *bc, const char *p, hpu_dtype_t dt, int64_t start, int len,
                           float *scratch) {
  int64_t idx[HPU_MAX_DIMS], off = 0, q = start;
  size_t es = hpu_dtype_size(dt);
  for (int d = 0; d < bc->nd; d++) {
    idx[d] = q % bc->size[d];
    q /= bc->size[d];
    off += idx[d] * bc->stride[d];
  }
  const int64_t n0 = bc->size[0], s0 = bc->stride[0];
  for (int i = 0; i < len;) {
    int run = (int)(n0 - idx[0] < len - i ? n0 - idx[0] : len - i);
    float *o = scratch + i;
    if (s0 == 0) {
      float v = hpu_load_f32(p + (size_t)off * es, dt);
      for (int t = 0; t < run; t++) o[t] = v;
    } else if (s0 == 1 && dt == HPU_FLOAT32) {
      memcpy(o, (const float *)p + off, (size_t)run * sizeof(float));
    } else {
      for (int t = 0; t < run; t++) o[t] = hpu_load_f32(p + (size_t)(off + t * s0) * es, dt);
    }
    i += run;
    idx[0] += run;
    off += run * s0;
    for (int d = 0; d + 1 < bc->nd && idx[d] == bc->size[d]; d++) {
      off += bc->stride[d + 1] - idx[d] * bc->stride[d];
      idx[d] = 0;
      idx[d + 1]++;
    }
  }
  return scratch;
}

/* Operand k of member m for elements [start, start+len) as floats. */
static const float *operand(const group_run_t *r, int m, int k, int64_t start, int len,
                            float tiles[][PITCH], float *scratch) {
  const member_t *mb = &r->m[m];
  int src = r->g->src[m][k];
  if (src >= 0) return tiles[src];
  const char *p = mb->in[k];
  if (mb->bc[k].nd) return gather(&mb->bc[k], p, mb->dt, start, len, scratch);
  if (mb->dt == HPU_FLOAT32) return (const float *)p + start;
  size_t es = hpu_dtype_size(mb->dt);
  for (int i = 0; i < len; i++) scratch[i] = hpu_load_f32(p + (size_t)(start + i) * es, mb->dt);
  return scratch;
}

/* One loop per operand shape (tensor/scalar), so each vectorises. */
#define FUSED_LOOPS(EXPR)                                                            \
  do {                                                                               \
    if (a && b) {                                                                    \
      for (int i = 0; i < len; i++) { float x = a[i], y = b[i]; (void)y; o[i] = (EXPR); } \
    } else if (a) {                                                                  \
      for (int i = 0; i < len; i++) { float x = a[i], y = b_s; (void)y; o[i] = (EXPR); } \
    } else if (b) {                                                                  \
      for (int i = 0; i < len; i++) { float x = a_s, y = b[i]; (void)y; o[i] = (EXPR); } \
    } else {                                                                         \
      for (int i = 0; i < len; i++) { float x = a_s, y = b_s; (void)y; o[i] = (EXPR); } \
    }                                                                                \
  } while (0)

/* Math operand k of pointwise member m: a tile, memory, or a constant. */
static const float *pw_operand(const group_run_t *r, int m, int k, int64_t start, int len,
                               float tiles[][PITCH], float *scratch) {
  const member_t *mb = &r->m[m];
  int input = mb->pw.input_of[k];
  float v;
  if (input < 0) {
    v = mb->pw.scalar[k];
  } else if (r->g->src[m][input] < 0 && r->g->numel != 1 &&
             hpu_tensor_numel(&r->nodes[r->g->first + m].inputs[input]) == 1) {
    v = hpu_load_f32(mb->in[input], mb->dt); /* a broadcast one-element tensor */
  } else {
    return operand(r, m, input, start, len, tiles, scratch);
  }
  for (int i = 0; i < len; i++) scratch[i] = v;
  return scratch;
}

static void store_member(const group_run_t *r, int m, int64_t start, int len, float *o) {
  const member_t *mb = &r->m[m];
  if (mb->dt != HPU_FLOAT32)
    for (int i = 0; i < len; i++) o[i] = hpu_round_to(o[i], mb->dt);
  if (r->g->store[m]) {
    if (mb->dt == HPU_FLOAT32) {
      memcpy((float *)mb->out + start, o, (size_t)len * sizeof(float));
    } else {
      size_t es = hpu_dtype_size(mb->dt);
      for (int i = 0; i < len; i++) hpu_store_f32(mb->out + (size_t)(start + i) * es, mb->dt, o[i]);
    }
  }
}

static void run_pw_member(const group_run_t *r, int m, int64_t start, int len, float tiles[][PITCH],
                          float scratch[][PITCH]) {
  const member_t *mb = &r->m[m];
  const float *ops[3] = {NULL, NULL, NULL};
  for (int k = 0; k < mb->pw.arity; k++) ops[k] = pw_operand(r, m, k, start, len, tiles, scratch[k]);
  hpu_pw_tile_run(&mb->pw, len, tiles[m], ops[0], ops[1], ops[2]);
  store_member(r, m, start, len, tiles[m]);
}

/* The arithmetic members' loops, cloned per ISA as the eager kernels are
 * (the generic build is SSE2: its 4-wide loads could not keep up with data
 * in L3). Each loop is one IEEE operation per element (fmaf is exactly
 * rounded), so every clone gives the same bits. */
#define DEF_MEMBER_MATH(ISA)                                                                  \
  static HPU_ATTR_##ISA void member_math_##ISA(fop_t op, int len, float *restrict o,           \
                                               const float *restrict a, const float *restrict b, \
                                               float a_s, float b_s, float al) {              \
    switch (op) {                                                                             \
      case F_ADD: FUSED_LOOPS(x + y); break;                                                  \
      case F_ADDA: FUSED_LOOPS(fmaf(y, al, x)); break;                                        \
      case F_MUL: FUSED_LOOPS(x * y); break;                                                  \
      case F_DIV: FUSED_LOOPS(x / y); break;                                                  \
      case F_RELU: FUSED_LOOPS(x < 0 ? 0.0f : x); break;                                      \
      case F_PW: break; /* run_pw_member */                                                   \
    }                                                                                         \
  }

DEF_MEMBER_MATH(generic)
#if HPU_HAVE_ISA_CLONES
DEF_MEMBER_MATH(avx2)
DEF_MEMBER_MATH(avx512)
#endif

static member_math_fn pick_member_math(void) {
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  if (isa == HPU_ISA_AVX512) return member_math_avx512;
  if (isa == HPU_ISA_AVX2) return member_math_avx2;
#endif
  return member_math_generic;
}

static void run_member(const group_run_t *r, int m, int64_t start, int len, float tiles[][PITCH],
                       float *s0, float *s1) {
  const member_t *mb = &r->m[m];
  const float *a = mb->a_scalar ? NULL : operand(r, m, 0, start, len, tiles, s0);
  const float *b = (mb->op == F_RELU || mb->b_scalar) ? NULL : operand(r, m, 1, start, len, tiles, s1);
  r->math(mb->op, len, tiles[m], a, b, mb->a, mb->b, mb->alpha);
  store_member(r, m, start, len, tiles[m]);
}

/* The members over elements [begin, end); with `copy`, the feeder's results
 * (rounded to its dtype) also go to copy[0 .. end - begin). */
static void run_tiles(const group_run_t *r, int64_t begin, int64_t end, char *copy) {
  /* Tiles and scratch start 1 KB past a 4 KB boundary, each PITCH floats
   * after the last: a tile written at the same offset within a page as the
   * page-aligned operands the loop reads (the allocator's big blocks) makes
   * every load wait on a store (4K aliasing); that had run the fused loops
   * at half speed or less, depending on where the stack happened to be. */
  _Alignas(4096) float space[256 + (HPU_FUSION_MAX_GROUP + 3) * PITCH];
  float (*tiles)[PITCH] = (float (*)[PITCH])(space + 256);
  float (*scratch)[PITCH] = tiles + HPU_FUSION_MAX_GROUP;
  int feeder = r->g->rows_node >= 0 ? r->g->feeder : -1;
  hpu_dtype_t fdt = feeder >= 0 ? r->m[feeder].dt : HPU_FLOAT32;
  size_t fes = hpu_dtype_size(fdt);
  for (int64_t t = begin; t < end; t += TILE) {
    int len = (int)(end - t < TILE ? end - t : TILE);
    for (int m = 0; m < r->g->count; m++) {
      if (r->m[m].op == F_PW) run_pw_member(r, m, t, len, tiles, scratch);
      else run_member(r, m, t, len, tiles, scratch[0], scratch[1]);
    }
    if (copy) {
      char *dst = copy + (size_t)(t - begin) * fes;
      if (fdt == HPU_FLOAT32) memcpy(dst, tiles[feeder], (size_t)len * sizeof(float));
      else
        for (int i = 0; i < len; i++) hpu_store_f32(dst + (size_t)i * fes, fdt, tiles[feeder][i]);
    }
  }
}

static void run_range(void *ctx, int64_t begin, int64_t end) { run_tiles(ctx, begin, end, NULL); }

/* Rows of a row op per block: the block's copy of its input (64 KB in
 * fp32) stays in L2 between the members writing it and the row op reading. */
#define ROW_BLOCK_ELEMS 16384
/* A reduction's block is much smaller: its copy (4 KB in fp32) stays in
 * L1, and the reduce kernel costs little per call (layer_norm's does: it
 * ran several times slower with this block size). For a fused
 * (a + b).sum(-1) or var(-1) over [4096 x 1024], 1024-element blocks were
 * the fastest tried (docs/PERFORMANCE.md). */
#define REDUCE_BLOCK_ELEMS 1024

/* The row op restricted to rows [r0, r0 + rows), reading its input from
 * `in` (a dense copy of those rows). */
static void row_subnode(const hpu_node_t *T, hpu_node_t *sub, char *in, hpu_dtype_t in_dt, int64_t r0,
                        int64_t rows, int64_t len) {
  *sub = *T;
  int64_t sizes[2] = {rows, len};
  hpu_tensor_init_contiguous(&sub->inputs[0], in, in_dt, 2, sizes);
  const hpu_tensor_t *out = &T->outputs[0];
  hpu_tensor_init_contiguous(&sub->outputs[0],
                             (char *)hpu_tensor_data(out) + r0 * len * (int64_t)hpu_dtype_size(out->dtype),
                             out->dtype, 2, sizes);
  if (T->op == HPU_OP_SOFTMAX) {
    sub->params.nn.i[0] = 1;
  } else if (T->op == HPU_OP_REDUCE) { /* one element per row, dim 1 reduced */
    int64_t osz[2] = {rows, 1};
    sub->params.nn.i[1] = 2;
    for (int k = 0; k < T->num_outputs; k++) {
      const hpu_tensor_t *o = &T->outputs[k];
      hpu_tensor_init_contiguous(&sub->outputs[k],
                                 (char *)hpu_tensor_data(o) + r0 * (int64_t)hpu_dtype_size(o->dtype),
                                 o->dtype, 2, osz);
    }
  } else { /* layer_norm: mean and rstd per row */
    for (int k = 1; k < 3; k++) {
      const hpu_tensor_t *st = &T->outputs[k];
      hpu_tensor_init_contiguous(&sub->outputs[k],
                                 (char *)hpu_tensor_data(st) + r0 * (int64_t)hpu_dtype_size(st->dtype),
                                 st->dtype, 1, &rows);
    }
  }
}

typedef struct {
  group_run_t r;
  const hpu_node_t *row_op;
  hpu_status_t status;
} rows_run_t;

static void run_rows(void *ctx, int64_t begin, int64_t end) {
  rows_run_t *rr = ctx;
  const hpu_fused_group_t *g = rr->r.g;
  int64_t len = g->row_len;
  int64_t block = (rr->row_op->op == HPU_OP_REDUCE ? REDUCE_BLOCK_ELEMS : ROW_BLOCK_ELEMS) / len;
  if (block < 1) block = 1;
  if (block > end - begin) block = end - begin;
  hpu_dtype_t dt = rr->r.m[g->feeder].dt;
  char *copy = malloc((size_t)(block * len) * hpu_dtype_size(dt));
  if (!copy) {
    __atomic_store_n(&rr->status, HPU_ERROR_SYSTEM, __ATOMIC_RELAXED); /* host memory */
    return;
  }
  hpu_node_t sub;
  for (int64_t r0 = begin; r0 < end; r0 += block) {
    int64_t rows = end - r0 < block ? end - r0 : block;
    run_tiles(&rr->r, r0 * len, (r0 + rows) * len, copy);
    row_subnode(rr->row_op, &sub, copy, dt, r0, rows, len);
    hpu_status_t st = hpu_node_execute(&sub);
    if (st != HPU_SUCCESS) __atomic_store_n(&rr->status, st, __ATOMIC_RELAXED);
  }
  free(copy);
}

static hpu_status_t run_group(const hpu_fused_group_t *g, const hpu_node_t *nodes) {
  rows_run_t rr;
  rr.r.g = g;
  rr.r.nodes = nodes;
  rr.r.math = pick_member_math();
  for (int m = 0; m < g->count; m++) prepare_member(&rr.r.m[m], &nodes[g->first + m], g->numel);
  if (g->rows_node < 0) {
    hpu_parallel_for(g->numel, 32768, run_range, &rr.r);
    return HPU_SUCCESS;
  }
  const hpu_node_t *T = &nodes[g->rows_node];
  rr.row_op = T;
  rr.status = HPU_SUCCESS;
  /* A reduction writes into host staging buffers, copied to its outputs
   * once every member has run (see admit_rows). */
  hpu_node_t staged;
  void *stage[HPU_MAX_OUTPUTS] = {NULL};
  if (T->op == HPU_OP_REDUCE) {
    staged = *T;
    for (int o = 0; o < T->num_outputs; o++) {
      const hpu_tensor_t *out = &T->outputs[o];
      stage[o] = malloc((size_t)hpu_tensor_numel(out) * hpu_dtype_size(out->dtype));
      if (!stage[o]) {
        for (int k = 0; k < o; k++) free(stage[k]);
        return hpu_error(HPU_ERROR_SYSTEM, "fused reduce: no host memory to stage %lld results",
                         (long long)hpu_tensor_numel(out));
      }
      hpu_tensor_init_contiguous(&staged.outputs[o], stage[o], out->dtype, out->ndim, out->sizes);
    }
    rr.row_op = &staged;
  }
  int64_t grain = 32768 / g->row_len;
  hpu_parallel_for(g->numel / g->row_len, grain > 0 ? grain : 1, run_rows, &rr);
  for (int o = 0; o < HPU_MAX_OUTPUTS && stage[o]; o++) {
    if (rr.status == HPU_SUCCESS)
      hpu_copy_bytes(hpu_tensor_data(&T->outputs[o]), stage[o],
                     (size_t)hpu_tensor_numel(&T->outputs[o]) * hpu_dtype_size(T->outputs[o].dtype));
    free(stage[o]);
  }
  if (rr.status != HPU_SUCCESS)
    return hpu_error(rr.status, "fused %s: a block of rows failed (%s; host memory for its copy?)",
                     hpu_op_name(T->op), hpu_status_name(rr.status));
  return HPU_SUCCESS;
}

hpu_status_t hpu_plan_execute(const hpu_plan_t *plan, const hpu_node_t *nodes, int n) {
  for (int i = 0; i < n;) {
    int g = plan && i < plan->num_nodes ? plan->group_of[i] : -1;
    if (g < 0) {
      hpu_status_t st = hpu_node_execute(&nodes[i]);
      if (st != HPU_SUCCESS) return st;
      i++;
    } else {
      hpu_status_t st = run_group(&plan->groups[g], nodes);
      if (st != HPU_SUCCESS) return st;
      i += plan->groups[g].count + (plan->groups[g].rows_node >= 0);
    }
  }
  return HPU_SUCCESS;
}
