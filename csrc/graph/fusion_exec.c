/* Elementwise fusion, execution: runs a plan's fused groups in cache-sized
 * tiles (graph/fusion_plan.h says what a group is; fusion_plan.c forms
 * them). Fused results are bitwise equal to running the nodes one by one:
 * each member computes in float exactly as its eager kernel does and
 * rounds to its output dtype. */
#include "graph/fusion.h"
#include "graph/fusion_tiling.h"
#include "graph/trace_nodes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/clock.h"
#include "hpu/memory.h"
#include "hpu/parallel.h"
#include "kernels/bytes.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/nn_rows.h"
#include "kernels/pw_tile.h"

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

/* bf16: each result rounded to bf16 in the same loop. */
typedef void (*member_math_fn)(fop_t op, int len, float *restrict o, const float *restrict a,
                               const float *restrict b, float a_s, float b_s, float al, int bf16);

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
    } else if (s0 == 1) {
      hpu_nn_load_row(o, p + (size_t)off * es, run, dt);
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
                            float tiles[][HPU_FUSION_PITCH], float *scratch) {
  const member_t *mb = &r->m[m];
  int src = r->g->src[m][k];
  if (src >= 0) return tiles[src];
  const char *p = mb->in[k];
  if (mb->bc[k].nd) return gather(&mb->bc[k], p, mb->dt, start, len, scratch);
  if (mb->dt == HPU_FLOAT32) return (const float *)p + start;
  hpu_nn_load_row(scratch, p + (size_t)start * hpu_dtype_size(mb->dt), len, mb->dt);
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
                               float tiles[][HPU_FUSION_PITCH], float *scratch) {
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

/* Round member m's tile to its dtype, as its eager kernel's result is, and
 * store it when the group's output needs it. bf16 and fp16 round and store
 * in one vectorised pass (hpu_nn_round_row); element by element they took
 * most of a bf16 group's time. */
static void store_member(const group_run_t *r, int m, int64_t start, int len, float *o) {
  const member_t *mb = &r->m[m];
  int store = r->g->store[m];
  size_t es = hpu_dtype_size(mb->dt);
  if (mb->dt == HPU_FLOAT32) {
    if (store) memcpy((float *)mb->out + start, o, (size_t)len * sizeof(float));
  } else if (mb->dt == HPU_BFLOAT16 || mb->dt == HPU_FLOAT16) {
    hpu_nn_round_row(o, store ? mb->out + (size_t)start * es : NULL, len, mb->dt);
  } else {
    for (int i = 0; i < len; i++) o[i] = hpu_round_to(o[i], mb->dt);
    if (store)
      for (int i = 0; i < len; i++) hpu_store_f32(mb->out + (size_t)(start + i) * es, mb->dt, o[i]);
  }
}

/* Store member m's tile, already rounded to its dtype by its math. */
static void store_rounded_member(const group_run_t *r, int m, int64_t start, int len, const float *o) {
  const member_t *mb = &r->m[m];
  if (r->g->store[m]) hpu_nn_store_row(mb->out + (size_t)start * hpu_dtype_size(mb->dt), o, len, mb->dt);
}

static void run_pw_member(const group_run_t *r, int m, int64_t start, int len,
                          float tiles[][HPU_FUSION_PITCH], float scratch[][HPU_FUSION_PITCH]) {
  const member_t *mb = &r->m[m];
  const float *ops[3] = {NULL, NULL, NULL};
  for (int k = 0; k < mb->pw.arity; k++) ops[k] = pw_operand(r, m, k, start, len, tiles, scratch[k]);
  hpu_pw_tile_run(&mb->pw, len, tiles[m], ops[0], ops[1], ops[2]);
  store_member(r, m, start, len, tiles[m]);
}

/* The arithmetic members' loops, cloned per ISA as the eager kernels are
 * (the generic build is SSE2: its 4-wide loads could not keep up with data
 * in L3). Each loop is one IEEE operation per element (fmaf is exactly
 * rounded), so every clone gives the same bits. A bf16 member rounds in
 * the same loop: as a pass of its own, the rounding cost more than the
 * arithmetic. */
#define MEMBER_OPS(R)                                    \
  switch (op) {                                          \
    case F_ADD: FUSED_LOOPS(R(x + y)); break;            \
    case F_ADDA: FUSED_LOOPS(R(fmaf(y, al, x))); break;  \
    case F_MUL: FUSED_LOOPS(R(x * y)); break;            \
    case F_DIV: FUSED_LOOPS(R(x / y)); break;            \
    case F_RELU: FUSED_LOOPS(R(x < 0 ? 0.0f : x)); break; \
    case F_PW: break; /* run_pw_member */                \
  }
#define AS_IS(v) (v)
#define DEF_MEMBER_MATH(ISA)                                                                    \
  static HPU_ATTR_##ISA void member_math_##ISA(fop_t op, int len, float *restrict o,             \
                                               const float *restrict a, const float *restrict b,   \
                                               float a_s, float b_s, float al, int bf16) {      \
    if (bf16) {                                                                                 \
      MEMBER_OPS(hpu_round_bf16)                                                                \
    } else {                                                                                    \
      MEMBER_OPS(AS_IS)                                                                         \
    }                                                                                           \
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

static void run_member(const group_run_t *r, int m, int64_t start, int len,
                       float tiles[][HPU_FUSION_PITCH], float *s0, float *s1) {
  const member_t *mb = &r->m[m];
  const float *a = mb->a_scalar ? NULL : operand(r, m, 0, start, len, tiles, s0);
  const float *b = (mb->op == F_RELU || mb->b_scalar) ? NULL : operand(r, m, 1, start, len, tiles, s1);
  int bf16 = mb->dt == HPU_BFLOAT16;
  r->math(mb->op, len, tiles[m], a, b, mb->a, mb->b, mb->alpha, bf16);
  if (bf16) store_rounded_member(r, m, start, len, tiles[m]);
  else store_member(r, m, start, len, tiles[m]);
}

/* The members over elements [begin, end); with `copy`, the feeder's results
 * (rounded to its dtype) also go to copy[0 .. end - begin). */
static void run_tiles(const group_run_t *r, int64_t begin, int64_t end, char *copy) {
  /* Tiles and scratch start past a 4 KB boundary, each HPU_FUSION_PITCH
   * floats after the last, against 4K aliasing (fusion_tiling.h). */
  _Alignas(4096) float space[HPU_FUSION_TILE_OFFSET + (HPU_FUSION_MAX_GROUP + 3) * HPU_FUSION_PITCH];
  float (*tiles)[HPU_FUSION_PITCH] = (float (*)[HPU_FUSION_PITCH])(space + HPU_FUSION_TILE_OFFSET);
  float (*scratch)[HPU_FUSION_PITCH] = tiles + HPU_FUSION_MAX_GROUP;
  int feeder = r->g->rows_node >= 0 ? r->g->feeder : -1;
  hpu_dtype_t fdt = feeder >= 0 ? r->m[feeder].dt : HPU_FLOAT32;
  size_t fes = hpu_dtype_size(fdt);
  for (int64_t t = begin; t < end; t += HPU_FUSION_TILE) {
    int len = (int)(end - t < HPU_FUSION_TILE ? end - t : HPU_FUSION_TILE);
    for (int m = 0; m < r->g->count; m++) {
      if (r->m[m].op == F_PW) run_pw_member(r, m, t, len, tiles, scratch);
      else run_member(r, m, t, len, tiles, scratch[0], scratch[1]);
    }
    if (copy) {
      char *dst = copy + (size_t)(t - begin) * fes;
      hpu_nn_store_row(dst, tiles[feeder], len, fdt);
    }
  }
}

static void run_range(void *ctx, int64_t begin, int64_t end) { run_tiles(ctx, begin, end, NULL); }


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
  int64_t block_elems =
      rr->row_op->op == HPU_OP_REDUCE ? HPU_FUSION_REDUCE_BLOCK_ELEMS : HPU_FUSION_ROW_BLOCK_ELEMS;
  int64_t block = block_elems / len;
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
    hpu_parallel_for(g->numel, HPU_FUSION_GRAIN, run_range, &rr.r);
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
  int64_t grain = HPU_FUSION_GRAIN / g->row_len;
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
  int tracing = hpu_trace_active(); /* read once: a graph is traced whole or not at all */
  for (int i = 0; i < n;) {
    int g = plan && i < plan->num_nodes ? plan->group_of[i] : -1;
    uint64_t t0 = tracing ? hpu_now_ns() : 0;
    if (g < 0) {
      hpu_status_t st = hpu_node_execute(&nodes[i]);
      if (st != HPU_SUCCESS) return st;
      if (tracing) hpu_trace_node(&nodes[i], t0, hpu_now_ns());
      i++;
    } else {
      hpu_status_t st = run_group(&plan->groups[g], nodes);
      if (st != HPU_SUCCESS) return st;
      int members = plan->groups[g].count + (plan->groups[g].rows_node >= 0);
      if (tracing) hpu_trace_fused(&nodes[i], members, t0, hpu_now_ns());
      i += members;
    }
  }
  return HPU_SUCCESS;
}
