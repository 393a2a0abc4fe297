/* HPU_OP_CONV / HPU_OP_CONV_BACKWARD: 2-d convolution (NCHW, float32 or
 * float64, and int64 forwards: conv_tmpl.h, included once per type) as GEMMs
 * on the matmul kernel, which picks our packed microkernels or
 * OpenBLAS by shape (matmul.c).
 *  - 1x1, stride 1, no padding: x[n, g] already is the GEMM's [Cg, H*W]
 *    operand, so y[n, g] = W[g] @ x[n, g] and dx[n, g] = W[g]^T @ dy[n, g]
 *    run on the tensors in place.
 *  - otherwise im2col: the patches of a block of images (or, when one image
 *    is too big, of a band of its output rows) go into a column panel of
 *    about COL_BUDGET bytes, laid out [G, K, block pixels] (K = Cg*KH*KW),
 *    so the panel stays in cache while the GEMM packs it instead of
 *    materialising the whole im2col matrix. Images of a block are side by
 *    side in the panel's columns: one wide GEMM per block rather than one
 *    thin GEMM per image (late ResNet stages have 4x4 outputs).
 * Backward uses the same panels: dW += dy_block @ col^T (summed over the
 * blocks in a fixed order), dx += col2im(W^T @ dy_block), db = sum of dy
 * (double accumulation). im2col is parallel over panel rows, col2im over
 * input planes (each plane is written by one thread: no races). In float32,
 * a small dW and a col2im dx are computed by image chunks instead, each
 * chunk on one thread (conv_tmpl.h, "backward by image chunks"). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/conv_igemm.h"
#include "kernels/conv_winograd.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"
#include "kernels/scratch.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

/* Bytes of one column panel: a few hundred KB sits in L2 next to the
 * GEMM's packed panels. But a panel is at least MIN_COLS pixels wide: with
 * a deep K (256 or 512 channels x 3x3) the budget left GEMMs 40-60 columns
 * wide, and on the Xeon (AMX) class, batch 8, the 3x3 256->256 at 14x14
 * forward took 17.3 ms that way and 14.2 ms with the whole batch in one
 * panel (512->512 at 7x7: 22.4 and 16.9 ms). */
#define COL_BUDGET (512 * 1024)
#define MIN_COLS 512

typedef struct {
  int64_t N, C, H, W, Co, KH, KW, OH, OW, G, Cg, Cog, K, P;
  int64_t sh, sw, ph, pw, dh, dw;
} geo_t;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Geometry from x [N, C, H, W], weight [Co, Cg, KH, KW] and the params. */
static geo_t geometry(const hpu_node_t *n, const hpu_tensor_t *x, const hpu_tensor_t *w) {
  const hpu_nn_params_t *p = &n->params.nn;
  geo_t g;
  g.N = x->sizes[0], g.C = x->sizes[1], g.H = x->sizes[2], g.W = x->sizes[3];
  g.Co = w->sizes[0], g.Cg = w->sizes[1], g.KH = w->sizes[2], g.KW = w->sizes[3];
  g.G = p->i[0];
  g.dh = p->i[2], g.dw = p->i[3];
  g.sh = p->sizes[0], g.sw = p->sizes[1];
  g.ph = p->strides[0], g.pw = p->strides[1];
  g.Cog = g.G > 0 ? g.Co / g.G : 0;
  g.K = g.Cg * g.KH * g.KW;
  g.OH = g.sh > 0 && g.dh > 0 ? out_size(g.H, g.KH, g.sh, g.ph, g.dh) : 0;
  g.OW = g.sw > 0 && g.dw > 0 ? out_size(g.W, g.KW, g.sw, g.pw, g.dw) : 0;
  g.P = g.OH * g.OW;
  return g;
}

/* t has nd dims, is contiguous and of dtype dt: the node's, float64 when
 * its input x is, else float32. */
static hpu_status_t need(const char *name, const hpu_tensor_t *t, const char *what, int nd, hpu_dtype_t dt) {
  if (t->ndim != nd) return hpu_error(INVALID, "%s: %s must have %d dims, got %d", name, what, nd, t->ndim);
  if (t->dtype != dt)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be %s, got %s", name, what, hpu_dtype_name(dt),
                     hpu_dtype_name(t->dtype));
  if (!hpu_tensor_is_contiguous(t)) return hpu_error(INVALID, "%s: %s must be contiguous", name, what);
  return HPU_SUCCESS;
}

static hpu_status_t need_shape(const char *name, const hpu_tensor_t *t, const char *what, int64_t a,
                               int64_t b, int64_t c, int64_t d) {
  int64_t want[4] = {a, b, c, d};
  for (int k = 0; k < t->ndim; k++)
    if (t->sizes[k] != want[k])
      return hpu_error(INVALID, "%s: %s must be [%lld, %lld, %lld, %lld]", name, what, (long long)a,
                       (long long)b, (long long)c, (long long)d);
  return HPU_SUCCESS;
}

/* The dtype every operand has: float64 or int64 when the input x is, else
 * float32. */
static hpu_dtype_t node_dtype(const hpu_node_t *n) {
  int xi = n->op == HPU_OP_CONV ? 0 : 1;
  hpu_dtype_t d = n->num_inputs > xi ? n->inputs[xi].dtype : HPU_FLOAT32;
  if (d == HPU_FLOAT64 || d == HPU_INT64) return d;
  return HPU_FLOAT32;
}

/* x and weight (inputs xi and wi) and the params agree. */
static hpu_status_t check_geometry(const hpu_node_t *n, int xi, int wi, geo_t *g) {
  const char *name = hpu_op_name(n->op);
  const hpu_tensor_t *x = &n->inputs[xi], *w = &n->inputs[wi];
  hpu_dtype_t dt = node_dtype(n);
  HPU_TRY(need(name, x, "the input", 4, dt));
  HPU_TRY(need(name, w, "the weight", 4, dt));
  *g = geometry(n, x, w);
  if (g->G < 1) return hpu_error(INVALID, "%s: groups must be positive, got %lld", name, (long long)g->G);
  if (g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0)
    return hpu_error(INVALID, "%s: stride and dilation must be positive and padding non-negative", name);
  if (g->C != g->Cg * g->G || g->Co % g->G != 0 || g->KH < 1 || g->KW < 1)
    return hpu_error(INVALID, "%s: weight [%lld, %lld, %lld, %lld] does not fit %lld input channels in %lld groups",
                     name, (long long)g->Co, (long long)g->Cg, (long long)g->KH, (long long)g->KW,
                     (long long)g->C, (long long)g->G);
  if (g->OH < 1 || g->OW < 1) return hpu_error(INVALID, "%s: the kernel is larger than the padded input", name);
  return HPU_SUCCESS;
}

hpu_status_t hpu_conv_validate(const hpu_node_t *n) {
  const char *name = hpu_op_name(n->op);
  hpu_dtype_t dt = node_dtype(n);
  geo_t g;
  if (n->op == HPU_OP_CONV) {
    int has_b = n->params.nn.i[1] != 0;
    if (n->num_inputs != 2 + has_b || n->num_outputs != 1)
      return hpu_error(INVALID, "%s: expects %d inputs and 1 output", name, 2 + has_b);
    for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
    HPU_TRY(check_geometry(n, 0, 1, &g));
    if (has_b) {
      HPU_TRY(need(name, &n->inputs[2], "the bias", 1, dt));
      if (n->inputs[2].sizes[0] != g.Co) return hpu_error(INVALID, "%s: bias must be [%lld]", name, (long long)g.Co);
    }
    HPU_TRY(hpu_check_node_output(n, 0));
    HPU_TRY(need(name, &n->outputs[0], "the output", 4, dt));
    return need_shape(name, &n->outputs[0], "the output", g.N, g.Co, g.OH, g.OW);
  }
  int64_t mask = n->params.nn.i[1];
  if (n->num_inputs != 3 || n->num_outputs != 3)
    return hpu_error(INVALID, "%s: expects 3 inputs and 3 outputs", name);
  for (int i = 0; i < 3; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  HPU_TRY(check_geometry(n, 1, 2, &g));
  HPU_TRY(need(name, &n->inputs[0], "the gradient", 4, dt));
  HPU_TRY(need_shape(name, &n->inputs[0], "the gradient", g.N, g.Co, g.OH, g.OW));
  static const char *what[3] = {"grad_input", "grad_weight", "grad_bias"};
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    HPU_TRY(need(name, &n->outputs[k], what[k], k == 2 ? 1 : 4, dt));
    if (k == 0) HPU_TRY(need_shape(name, &n->outputs[0], what[0], g.N, g.C, g.H, g.W));
    if (k == 1) HPU_TRY(need_shape(name, &n->outputs[1], what[1], g.Co, g.Cg, g.KH, g.KW));
    if (k == 2 && n->outputs[2].sizes[0] != g.Co)
      return hpu_error(INVALID, "%s: grad_bias must be [%lld]", name, (long long)g.Co);
  }
  return HPU_SUCCESS;
}

/* ---- blocks, im2col and col2im ----------------------------------------- */

/* Images [n0, n0 + nb) and output rows [r0, r0 + nr) (all rows when nb > 1);
 * the panel has L = nb * nr * OW columns. */
typedef struct {
  int64_t n0, nb, r0, nr, L;
} blk_t;

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Output columns [lo, hi) whose input column for kernel column kw is inside
 * the image. */
static void valid_cols(const geo_t *g, int64_t kw, int64_t *lo, int64_t *hi) {
  int64_t off = kw * g->dw - g->pw;
  *lo = ceil_div(-off, g->sw);
  *hi = floor_div(g->W - 1 - off, g->sw) + 1;
  if (*lo < 0) *lo = 0;
  if (*hi > g->OW) *hi = g->OW;
  if (*hi < *lo) *hi = *lo;
}

/* The blocks: as many whole images as fit COL_BUDGET, else bands of rows. */
static blk_t first_block(const geo_t *g, int64_t *rows_per_band, int64_t es) {
  int64_t img = g->G * g->K * g->P * es;
  int64_t budget = g->G * g->K * MIN_COLS * es;
  if (budget < COL_BUDGET) budget = COL_BUDGET;
  blk_t b = {0, 1, 0, g->OH, 0};
  *rows_per_band = g->OH;
  if (img <= budget) {
    b.nb = budget / img;
    if (b.nb > g->N) b.nb = g->N;
  } else {
    int64_t row = g->G * g->K * g->OW * es;
    *rows_per_band = budget / row > 0 ? budget / row : 1;
    if (*rows_per_band > g->OH) *rows_per_band = g->OH;
    b.nr = *rows_per_band;
  }
  b.L = b.nb * b.nr * g->OW;
  return b;
}

/* The next block after b; 0 when b was the last. */
static int next_block(const geo_t *g, int64_t band, blk_t *b) {
  if (b->nb == 1 && b->r0 + b->nr < g->OH) {
    b->r0 += b->nr;
  } else {
    b->n0 += b->nb;
    b->r0 = 0;
    if (b->n0 >= g->N) return 0;
    if (b->n0 + b->nb > g->N) b->nb = g->N - b->n0;
  }
  b->nr = b->nb > 1 ? g->OH : (band < g->OH - b->r0 ? band : g->OH - b->r0);
  b->L = b->nb * b->nr * g->OW;
  return 1;
}

static int is_pointwise(const geo_t *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* The shapes conv_winograd.c's F(2x2, 3x3) is for (its suits functions
 * decide on sizes and the CPU): one group, 3x3, stride 1, dilation 1. *wg
 * is its geometry. */
static int winograd_shape(const geo_t *g, hpu_conv_winograd_t *wg) {
  if (g->G != 1 || g->KH != 3 || g->KW != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1) return 0;
  *wg = (hpu_conv_winograd_t){g->N, g->C, g->H, g->W, g->Co, g->OH, g->OW, g->ph, g->pw};
  return 1;
}

static hpu_status_t oom(void) {
  return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the column panel");
}

#define T float
#define DT HPU_FLOAT32
#define FN(x) x##_f32
#define CONV_IGEMM
#include "kernels/conv_tmpl.h"
#undef CONV_IGEMM
#undef T
#undef DT
#undef FN
#define T double
#define DT HPU_FLOAT64
#define FN(x) x##_f64
#include "kernels/conv_tmpl.h"
#undef T
#undef DT
#undef FN
/* int64: the CPU's integer convolution has no gradient, but its transposed
 * convolution is the backward node's dx */
#define T int64_t
#define DT HPU_INT64
#define FN(x) x##_i64
#include "kernels/conv_tmpl.h"
#undef T
#undef DT
#undef FN

hpu_status_t hpu_conv_execute(const hpu_node_t *n) {
  hpu_dtype_t dt = node_dtype(n);
  if (n->op == HPU_OP_CONV)
    return dt == HPU_INT64 ? conv_forward_i64(n) : dt == HPU_FLOAT64 ? conv_forward_f64(n) : conv_forward_f32(n);
  return dt == HPU_INT64 ? conv_backward_i64(n) : dt == HPU_FLOAT64 ? conv_backward_f64(n) : conv_backward_f32(n);
}
