/* Elementwise fusion: planning (which runs of nodes fuse, which
 * intermediates stay in cache) and the tiled executor. Fused results are
 * bitwise equal to running the nodes one by one: each member computes in
 * float exactly as its eager kernel does and rounds to its output dtype. */
#include "graph/fusion.h"

#include "graph/ptrmap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/memory.h"
#include "hpu/parallel.h"
#include "kernels/cvt.h"
#include "kernels/pw_tile.h"

#define TILE 512

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

int hpu_plan_node_fusible(const hpu_node_t *nd) {
  if (!binary_fusible(nd) && !(hpu_op_is_pointwise(nd->op) && hpu_pw_tile_supported(nd)))
    return 0;
  int64_t n;
  if (!contiguous_numel(&nd->outputs[0], &n) || n == 0) return 0;
  for (int k = 0; k < nd->num_inputs; k++) {
    int64_t m;
    const hpu_tensor_t *in = &nd->inputs[k];
    if (hpu_tensor_numel(in) == 1) continue; /* a scalar, broadcast */
    if (!contiguous_numel(in, &m) || m != n) return 0;
  }
  return 1;
}

static void byte_range(const hpu_tensor_t *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t n = hpu_tensor_numel(t);
  *lo = (uintptr_t)hpu_tensor_data(t);
  *hi = *lo + (uintptr_t)n * hpu_dtype_size(t->dtype);
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

void hpu_graph_dead_outputs(const hpu_node_t *nodes, int n, uint8_t *dead) {
  /* Backwards, with the outputs of the later nodes indexed by address: an
   * output is dead when its buffer is freed, or when a later node
   * overwrites exactly this view (a pure temporary). */
  hpu_ptrmap_t later;
  int indexed = hpu_ptrmap_init_outputs(&later, nodes, n);
  for (int i = n - 1; i >= 0; i--) {
    const hpu_tensor_t *out = &nodes[i].outputs[0];
    int d = 0;
    /* Only fusible nodes' liveness changes a plan; leaving the others out
     * keeps allocator address reuse (which varies from step to step) out of
     * the graph signature. */
    if (hpu_plan_node_fusible(&nodes[i])) {
      d = !hpu_memory_is_allocated(out->storage);
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
    if (hpu_tensor_numel(in) == 1 && g->numel != 1) {
      /* a broadcast scalar read at run time: must not be written in the group */
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
      if (overlaps(out, in) && (hpu_tensor_numel(in) == 1 || !same_view(out, in))) return 0;
    }
  }
  for (int k = 0; k < nd->num_inputs; k++)
    if (g->src[m][k] < 0 && overlaps(out, &nd->inputs[k]) && !same_view(out, &nd->inputs[k]))
      return 0;
  return 1;
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
    memset(g, 0, sizeof *g);
    g->first = i;
    g->numel = hpu_tensor_numel(&nodes[i].outputs[0]);
    int j = i;
    while (j < n && j - i < HPU_FUSION_MAX_GROUP && hpu_plan_node_fusible(&nodes[j]) &&
           hpu_tensor_numel(&nodes[j].outputs[0]) == g->numel && admit(nodes, g, j))
      j++;
    g->count = j - i;
    if (g->count < 2) {
      i = j > i ? j : i + 1;
      continue;
    }
    for (int m = 0; m < g->count; m++) {
      int node = i + m;
      int keep = !dead[node] || read_outside(nodes, n, node, i, j);
      g->store[m] = (uint8_t)keep;
      plan->dropped_stores += !keep;
      plan->group_of[node] = plan->num_groups;
    }
    plan->fused_nodes += g->count;
    plan->num_groups++;
    i = j;
  }
  if (plan->num_groups == 0) {
    hpu_plan_free(plan);
    return NULL;
  }
  return plan;
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
} member_t;

typedef struct group_run {
  const hpu_fused_group_t *g;
  const hpu_node_t *nodes;
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

static void prepare_member(member_t *mb, const hpu_node_t *nd, int64_t numel) {
  memset(mb, 0, sizeof *mb);
  mb->dt = nd->compute_dtype;
  mb->out = hpu_tensor_data(&nd->outputs[0]);
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

/* Operand k of member m for elements [start, start+len) as floats. */
static const float *operand(const group_run_t *r, int m, int k, int64_t start, int len,
                            float tiles[][TILE], float *scratch) {
  const member_t *mb = &r->m[m];
  int src = r->g->src[m][k];
  if (src >= 0) return tiles[src];
  const char *p = mb->in[k];
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
                               float tiles[][TILE], float *scratch) {
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

static void run_pw_member(const group_run_t *r, int m, int64_t start, int len, float tiles[][TILE],
                          float scratch[][TILE]) {
  const member_t *mb = &r->m[m];
  const float *ops[3] = {NULL, NULL, NULL};
  for (int k = 0; k < mb->pw.arity; k++) ops[k] = pw_operand(r, m, k, start, len, tiles, scratch[k]);
  hpu_pw_tile_run(&mb->pw, len, tiles[m], ops[0], ops[1], ops[2]);
  store_member(r, m, start, len, tiles[m]);
}

static void run_member(const group_run_t *r, int m, int64_t start, int len, float tiles[][TILE],
                       float *s0, float *s1) {
  const member_t *mb = &r->m[m];
  float *restrict o = tiles[m];
  const float a_s = mb->a, b_s = mb->b, al = mb->alpha;
  const float *restrict a = mb->a_scalar ? NULL : operand(r, m, 0, start, len, tiles, s0);
  const float *restrict b =
      (mb->op == F_RELU || mb->b_scalar) ? NULL : operand(r, m, 1, start, len, tiles, s1);
  if (mb->op == F_RELU) b = NULL;
  switch (mb->op) {
    case F_ADD: FUSED_LOOPS(x + y); break;
    case F_ADDA: FUSED_LOOPS(fmaf(y, al, x)); break;
    case F_MUL: FUSED_LOOPS(x * y); break;
    case F_DIV: FUSED_LOOPS(x / y); break;
    case F_RELU: FUSED_LOOPS(x < 0 ? 0.0f : x); break;
    case F_PW: break; /* run_pw_member */
  }
  store_member(r, m, start, len, o);
}

static void run_range(void *ctx, int64_t begin, int64_t end) {
  const group_run_t *r = ctx;
  float tiles[HPU_FUSION_MAX_GROUP][TILE];
  float scratch[3][TILE];
  for (int64_t t = begin; t < end; t += TILE) {
    int len = (int)(end - t < TILE ? end - t : TILE);
    for (int m = 0; m < r->g->count; m++) {
      if (r->m[m].op == F_PW) run_pw_member(r, m, t, len, tiles, scratch);
      else run_member(r, m, t, len, tiles, scratch[0], scratch[1]);
    }
  }
}

static void run_group(const hpu_fused_group_t *g, const hpu_node_t *nodes) {
  group_run_t r;
  r.g = g;
  r.nodes = nodes;
  for (int m = 0; m < g->count; m++) prepare_member(&r.m[m], &nodes[g->first + m], g->numel);
  hpu_parallel_for(g->numel, 32768, run_range, &r);
}

hpu_status_t hpu_plan_execute(const hpu_plan_t *plan, const hpu_node_t *nodes, int n) {
  for (int i = 0; i < n;) {
    int g = plan && i < plan->num_nodes ? plan->group_of[i] : -1;
    if (g < 0) {
      hpu_status_t st = hpu_node_execute(&nodes[i]);
      if (st != HPU_SUCCESS) return st;
      i++;
    } else {
      run_group(&plan->groups[g], nodes);
      i += plan->groups[g].count;
    }
  }
  return HPU_SUCCESS;
}
