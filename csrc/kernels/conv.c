/* HPU_OP_CONV / HPU_OP_CONV_BACKWARD: 2-d convolution (NCHW, float32) as
 * GEMMs on the matmul kernel, which picks our packed microkernels or
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
 * input planes (each plane is written by one thread: no races). */
#include <stdlib.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"

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

static hpu_status_t need(const char *name, const hpu_tensor_t *t, const char *what, int nd) {
  if (t->ndim != nd) return hpu_error(INVALID, "%s: %s must have %d dims, got %d", name, what, nd, t->ndim);
  if (t->dtype != HPU_FLOAT32)
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: %s must be float32, got %s", name, what,
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

/* x and weight (inputs xi and wi) and the params agree. */
static hpu_status_t check_geometry(const hpu_node_t *n, int xi, int wi, geo_t *g) {
  const char *name = hpu_op_name(n->op);
  const hpu_tensor_t *x = &n->inputs[xi], *w = &n->inputs[wi];
  HPU_TRY(need(name, x, "the input", 4));
  HPU_TRY(need(name, w, "the weight", 4));
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
  geo_t g;
  if (n->op == HPU_OP_CONV) {
    int has_b = n->params.nn.i[1] != 0;
    if (n->num_inputs != 2 + has_b || n->num_outputs != 1)
      return hpu_error(INVALID, "%s: expects %d inputs and 1 output", name, 2 + has_b);
    for (int i = 0; i < n->num_inputs; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
    HPU_TRY(check_geometry(n, 0, 1, &g));
    if (has_b) {
      HPU_TRY(need(name, &n->inputs[2], "the bias", 1));
      if (n->inputs[2].sizes[0] != g.Co) return hpu_error(INVALID, "%s: bias must be [%lld]", name, (long long)g.Co);
    }
    HPU_TRY(hpu_check_node_output(n, 0));
    HPU_TRY(need(name, &n->outputs[0], "the output", 4));
    return need_shape(name, &n->outputs[0], "the output", g.N, g.Co, g.OH, g.OW);
  }
  int64_t mask = n->params.nn.i[1];
  if (n->num_inputs != 3 || n->num_outputs != 3)
    return hpu_error(INVALID, "%s: expects 3 inputs and 3 outputs", name);
  for (int i = 0; i < 3; i++) HPU_TRY(hpu_check_tensor(name, "input", i, &n->inputs[i]));
  HPU_TRY(check_geometry(n, 1, 2, &g));
  HPU_TRY(need(name, &n->inputs[0], "the gradient", 4));
  HPU_TRY(need_shape(name, &n->inputs[0], "the gradient", g.N, g.Co, g.OH, g.OW));
  static const char *what[3] = {"grad_input", "grad_weight", "grad_bias"};
  for (int k = 0; k < 3; k++) {
    if (!((mask >> k) & 1)) continue;
    HPU_TRY(hpu_check_node_output(n, k));
    HPU_TRY(need(name, &n->outputs[k], what[k], k == 2 ? 1 : 4));
    if (k == 0) HPU_TRY(need_shape(name, &n->outputs[0], what[0], g.N, g.C, g.H, g.W));
    if (k == 1) HPU_TRY(need_shape(name, &n->outputs[1], what[1], g.Co, g.Cg, g.KH, g.KW));
    if (k == 2 && n->outputs[2].sizes[0] != g.Co)
      return hpu_error(INVALID, "%s: grad_bias must be [%lld]", name, (long long)g.Co);
  }
  return HPU_SUCCESS;
}

/* ---- GEMMs through the matmul kernel ---------------------------------- */

static hpu_tensor_t view(const float *base, int nd, const int64_t *sz, const int64_t *st) {
  hpu_tensor_t t;
  t.storage = (void *)base;
  t.offset = 0;
  t.dtype = HPU_FLOAT32;
  t.ndim = nd;
  for (int d = 0; d < nd; d++) t.sizes[d] = sz[d], t.strides[d] = st[d];
  return t;
}

/* c = a @ b (+ add, broadcast to c, when add is given; add may be c). */
static void mm(hpu_tensor_t a, hpu_tensor_t b, hpu_tensor_t c, const hpu_tensor_t *add) {
  hpu_node_t n;
  n.op = HPU_OP_MATMUL;
  n.num_inputs = add ? 3 : 2;
  n.num_outputs = 1;
  n.compute_dtype = HPU_FLOAT32;
  n.inputs[0] = a;
  n.inputs[1] = b;
  if (add) n.inputs[2] = *add;
  n.outputs[0] = c;
  n.params.matmul.alpha = hpu_scalar_float(1);
  n.params.matmul.beta = hpu_scalar_float(1);
  hpu_kernel_matmul(&n);
}

/* ---- blocks, im2col and col2im ----------------------------------------- */

/* Images [n0, n0 + nb) and output rows [r0, r0 + nr) (all rows when nb > 1);
 * the panel has L = nb * nr * OW columns. */
typedef struct {
  int64_t n0, nb, r0, nr, L;
} blk_t;

typedef struct {
  const geo_t *g;
  blk_t b;
  const float *x; /* im2col source */
  float *dx;      /* col2im destination */
  float *col;
} panel_t;

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

static void im2col_rows(void *ctx, int64_t r_begin, int64_t r_end) {
  const panel_t *p = ctx;
  const geo_t *g = p->g;
  for (int64_t r = r_begin; r < r_end; r++) {
    int64_t gi = r / g->K, k = r % g->K;
    int64_t c = k / (g->KH * g->KW), kh = k / g->KW % g->KH, kw = k % g->KW;
    int64_t lo, hi;
    valid_cols(g, kw, &lo, &hi);
    int64_t ioff = kw * g->dw - g->pw;
    float *dst = p->col + r * p->b.L;
    for (int64_t b = 0; b < p->b.nb; b++) {
      const float *plane = p->x + ((p->b.n0 + b) * g->C + gi * g->Cg + c) * g->H * g->W;
      for (int64_t oh = p->b.r0; oh < p->b.r0 + p->b.nr; oh++, dst += g->OW) {
        int64_t ih = oh * g->sh - g->ph + kh * g->dh;
        if (ih < 0 || ih >= g->H) {
          memset(dst, 0, (size_t)g->OW * sizeof(float));
          continue;
        }
        const float *src = plane + ih * g->W + ioff;
        for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
        if (g->sw == 1) {
          memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
        } else {
          for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->sw];
        }
        for (int64_t ow = hi; ow < g->OW; ow++) dst[ow] = 0;
      }
    }
  }
}

/* dx planes (b, g, c) += the panel's columns that came from them. */
static void col2im_planes(void *ctx, int64_t q_begin, int64_t q_end) {
  const panel_t *p = ctx;
  const geo_t *g = p->g;
  for (int64_t q = q_begin; q < q_end; q++) {
    int64_t b = q / g->C, ch = q % g->C, gi = ch / g->Cg, c = ch % g->Cg;
    float *plane = p->dx + ((p->b.n0 + b) * g->C + ch) * g->H * g->W;
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t k = (c * g->KH + kh) * g->KW + kw;
        int64_t lo, hi;
        valid_cols(g, kw, &lo, &hi);
        int64_t ioff = kw * g->dw - g->pw;
        const float *src = p->col + (gi * g->K + k) * p->b.L + b * p->b.nr * g->OW;
        for (int64_t oh = p->b.r0; oh < p->b.r0 + p->b.nr; oh++, src += g->OW) {
          int64_t ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H) continue;
          float *dst = plane + ih * g->W + ioff;
          for (int64_t ow = lo; ow < hi; ow++) dst[ow * g->sw] += src[ow];
        }
      }
  }
}

/* The blocks: as many whole images as fit COL_BUDGET, else bands of rows. */
static blk_t first_block(const geo_t *g, int64_t *rows_per_band) {
  int64_t img = g->G * g->K * g->P * (int64_t)sizeof(float);
  int64_t budget = g->G * g->K * MIN_COLS * (int64_t)sizeof(float);
  if (budget < COL_BUDGET) budget = COL_BUDGET;
  blk_t b = {0, 1, 0, g->OH, 0};
  *rows_per_band = g->OH;
  if (img <= budget) {
    b.nb = budget / img;
    if (b.nb > g->N) b.nb = g->N;
  } else {
    int64_t row = g->G * g->K * g->OW * (int64_t)sizeof(float);
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

static void run_im2col(panel_t *p) {
  int64_t rows = p->g->G * p->g->K;
  int64_t grain = 65536 / (p->b.L + 1) + 1;
  hpu_parallel_for(rows, grain, im2col_rows, p);
}

/* [G, Cog, L] view of a tensor [N, Co, OH*OW] (y or dy) for block b: a direct
 * view when the block is one image, else NULL (the caller goes through a
 * [G, Cog, nb, rows] buffer). */
static hpu_tensor_t out_block_view(const geo_t *g, const float *y, const blk_t *b) {
  int64_t sz[4] = {g->G, g->Cog, b->nb, b->nr * g->OW};
  int64_t st[4] = {g->Cog * g->P, g->P, g->Co * g->P, 1};
  return view(y + b->n0 * g->Co * g->P + b->r0 * g->OW, 4, sz, st);
}

static hpu_tensor_t buf3(const float *base, int64_t a, int64_t b, int64_t c) {
  int64_t sz[3] = {a, b, c}, st[3] = {b * c, c, 1};
  return view(base, 3, sz, st);
}

static int is_pointwise(const geo_t *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

static hpu_status_t oom(void) {
  return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "convolution: out of host memory for the column panel");
}

/* ---- forward ------------------------------------------------------------ */

static hpu_status_t conv_forward(const hpu_node_t *n) {
  const hpu_tensor_t *xt = &n->inputs[0], *wt = &n->inputs[1];
  geo_t g = geometry(n, xt, wt);
  const float *x = hpu_tensor_data(xt), *w = hpu_tensor_data(wt);
  float *y = hpu_tensor_data(&n->outputs[0]);
  int has_b = n->params.nn.i[1] != 0;
  const float *bias = has_b ? hpu_tensor_data(&n->inputs[2]) : NULL;
  hpu_tensor_t W = buf3(w, g.G, g.Cog, g.K);
  if (is_pointwise(&g)) {
    int64_t xs[4] = {g.N, g.G, g.Cg, g.P}, xst[4] = {g.C * g.P, g.Cg * g.P, g.P, 1};
    int64_t ys[4] = {g.N, g.G, g.Cog, g.P}, yst[4] = {g.Co * g.P, g.Cog * g.P, g.P, 1};
    int64_t bs[4] = {1, g.G, g.Cog, 1}, bst[4] = {0, g.Cog, 1, 0};
    hpu_tensor_t bt = view(bias, 4, bs, bst);
    mm(W, view(x, 4, xs, xst), view(y, 4, ys, yst), has_b ? &bt : NULL);
    return HPU_SUCCESS;
  }
  int64_t band;
  panel_t p = {&g, first_block(&g, &band), x, NULL, NULL};
  p.col = malloc((size_t)(g.G * g.K * p.b.L) * sizeof(float));
  /* several images per block: the GEMM writes [G, Cog, nb, pixels] here */
  float *tmp = p.b.nb > 1 ? malloc((size_t)(g.G * g.Cog * p.b.L) * sizeof(float)) : NULL;
  if (!p.col || (p.b.nb > 1 && !tmp)) {
    free(p.col);
    free(tmp);
    return oom();
  }
  int64_t bs[3] = {g.G, g.Cog, 1}, bst[3] = {g.Cog, 1, 0};
  hpu_tensor_t bt = view(bias, 3, bs, bst);
  do {
    run_im2col(&p);
    hpu_tensor_t dst = out_block_view(&g, y, &p.b);
    hpu_tensor_t c = p.b.nb > 1 ? buf3(tmp, g.G, g.Cog, p.b.L) : dst;
    if (p.b.nb == 1) { /* [G, Cog, 1, pixels] -> [G, Cog, pixels] */
      c.ndim = 3;
      c.sizes[2] = p.b.L;
      c.strides[2] = 1;
    }
    mm(W, buf3(p.col, g.G, g.K, p.b.L), c, has_b ? &bt : NULL);
    if (p.b.nb > 1) {
      hpu_tensor_t src = view(tmp, 4, dst.sizes, (int64_t[4]){g.Cog * p.b.L, p.b.L, p.b.nr * g.OW, 1});
      hpu_copy_tensor(&dst, &src);
    }
  } while (next_block(&g, band, &p.b));
  free(p.col);
  free(tmp);
  return HPU_SUCCESS;
}

/* ---- backward ----------------------------------------------------------- */

typedef struct {
  const geo_t *g;
  const float *dy;
  float *db;
} bias_ctx_t;

static void bias_grad(void *ctx, int64_t c0, int64_t c1) {
  const bias_ctx_t *b = ctx;
  const geo_t *g = b->g;
  for (int64_t c = c0; c < c1; c++) {
    double s = 0;
    for (int64_t n = 0; n < g->N; n++) {
      const float *row = b->dy + (n * g->Co + c) * g->P;
      for (int64_t q = 0; q < g->P; q++) s += row[q];
    }
    b->db[c] = (float)s;
  }
}

/* With stride 1, dx is the forward convolution of dy with the weight
 * flipped in space and transposed per group (W'[g, ci, co, KH-1-kh,
 * KW-1-kw] = W[g, co, ci, kh, kw]) and padding dil * (k - 1) - pad: the
 * GEMM then has k = Cog * KH * KW and writes [Cg, pixels], where the
 * col2im route (k = Cog) writes a K-row panel and adds it back, measured
 * 1.6x slower on ResNet's 3x3 64->64 at 56x56. */
static hpu_status_t dx_as_convolution(const hpu_node_t *n, const geo_t *g, const float *dy, const float *w,
                                      float *dx) {
  int64_t KK = g->KH * g->KW;
  float *wt = malloc((size_t)(g->Co * g->Cg * KK) * sizeof(float));
  if (!wt) return oom();
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t co = 0; co < g->Cog; co++)
      for (int64_t ci = 0; ci < g->Cg; ci++) {
        const float *src = w + ((gi * g->Cog + co) * g->Cg + ci) * KK;
        float *dst = wt + ((gi * g->Cg + ci) * g->Cog + co) * KK;
        for (int64_t k = 0; k < KK; k++) dst[k] = src[KK - 1 - k];
      }
  hpu_node_t f;
  f.op = HPU_OP_CONV;
  f.num_inputs = 2;
  f.num_outputs = 1;
  f.compute_dtype = HPU_FLOAT32;
  int64_t ds[4] = {g->N, g->Co, g->OH, g->OW}, dst[4] = {g->Co * g->P, g->P, g->OW, 1};
  int64_t ws[4] = {g->C, g->Cog, g->KH, g->KW}, wst[4] = {g->Cog * KK, KK, g->KW, 1};
  int64_t xs[4] = {g->N, g->C, g->H, g->W}, xst[4] = {g->C * g->H * g->W, g->H * g->W, g->W, 1};
  f.inputs[0] = view(dy, 4, ds, dst);
  f.inputs[1] = view(wt, 4, ws, wst);
  f.outputs[0] = view(dx, 4, xs, xst);
  f.params = n->params;
  f.params.nn.i[1] = 0; /* no bias */
  f.params.nn.strides[0] = g->dh * (g->KH - 1) - g->ph;
  f.params.nn.strides[1] = g->dw * (g->KW - 1) - g->pw;
  hpu_status_t st = conv_forward(&f);
  free(wt);
  return st;
}

static hpu_status_t conv_backward(const hpu_node_t *n) {
  const hpu_tensor_t *xt = &n->inputs[1], *wt = &n->inputs[2];
  geo_t g = geometry(n, xt, wt);
  int64_t mask = n->params.nn.i[1];
  const float *dy = hpu_tensor_data(&n->inputs[0]), *x = hpu_tensor_data(xt), *w = hpu_tensor_data(wt);
  float *dx = mask & 1 ? hpu_tensor_data(&n->outputs[0]) : NULL;
  float *dw = mask & 2 ? hpu_tensor_data(&n->outputs[1]) : NULL;
  if (mask & 4) {
    bias_ctx_t b = {&g, dy, hpu_tensor_data(&n->outputs[2])};
    hpu_parallel_for(g.Co, 1, bias_grad, &b);
  }
  if (!dx && !dw) return HPU_SUCCESS;
  if (g.N == 0) { /* no images: dW is zero, dx empty */
    if (dw) memset(dw, 0, (size_t)(g.Co * g.K) * sizeof(float));
    return HPU_SUCCESS;
  }
  /* W^T per group: [G, K, Cog] */
  int64_t wts[3] = {g.G, g.K, g.Cog}, wtst[3] = {g.Cog * g.K, 1, g.K};
  hpu_tensor_t WT = view(w, 3, wts, wtst);
  int pointwise_dx = dx && is_pointwise(&g);
  if (pointwise_dx) {
    int64_t xs[4] = {g.N, g.G, g.Cg, g.P}, xst[4] = {g.C * g.P, g.Cg * g.P, g.P, 1};
    int64_t ys[4] = {g.N, g.G, g.Cog, g.P}, yst[4] = {g.Co * g.P, g.Cog * g.P, g.P, 1};
    mm(WT, view(dy, 4, ys, yst), view(dx, 4, xs, xst), NULL);
    dx = NULL;
    if (!dw) return HPU_SUCCESS;
  }
  if (dx && g.sh == 1 && g.sw == 1 && g.ph <= g.dh * (g.KH - 1) && g.pw <= g.dw * (g.KW - 1)) {
    HPU_TRY(dx_as_convolution(n, &g, dy, w, dx));
    dx = NULL;
    if (!dw) return HPU_SUCCESS;
  }
  if (dx) memset(dx, 0, (size_t)(g.N * g.C * g.H * g.W) * sizeof(float));
  int64_t band;
  panel_t p = {&g, first_block(&g, &band), x, dx, NULL};
  size_t panel = (size_t)(g.G * g.K * p.b.L);
  float *col = dw ? malloc(panel * sizeof(float)) : NULL;
  float *dcol = dx ? malloc(panel * sizeof(float)) : NULL;
  float *dyt = p.b.nb > 1 ? malloc((size_t)(g.G * g.Cog * p.b.L) * sizeof(float)) : NULL;
  if ((dw && !col) || (dx && !dcol) || (p.b.nb > 1 && !dyt)) {
    free(col);
    free(dcol);
    free(dyt);
    return oom();
  }
  hpu_tensor_t DW = buf3(dw, g.G, g.Cog, g.K);
  int first = 1;
  do {
    /* dy of the block as [G, Cog, L] */
    hpu_tensor_t src = out_block_view(&g, dy, &p.b);
    hpu_tensor_t D;
    if (p.b.nb > 1) {
      hpu_tensor_t t = view(dyt, 4, src.sizes, (int64_t[4]){g.Cog * p.b.L, p.b.L, p.b.nr * g.OW, 1});
      hpu_copy_tensor(&t, &src);
      D = buf3(dyt, g.G, g.Cog, p.b.L);
    } else {
      D = src;
      D.ndim = 3;
      D.sizes[2] = p.b.L;
      D.strides[2] = 1;
    }
    if (dw) {
      p.col = col;
      run_im2col(&p);
      int64_t cs[3] = {g.G, p.b.L, g.K}, cst[3] = {g.K * p.b.L, 1, p.b.L};
      mm(D, view(col, 3, cs, cst), DW, first ? NULL : &DW);
    }
    if (dx) {
      p.col = dcol;
      mm(WT, D, buf3(dcol, g.G, g.K, p.b.L), NULL);
      hpu_parallel_for(p.b.nb * g.C, 1, col2im_planes, &p);
    }
    first = 0;
  } while (next_block(&g, band, &p.b));
  free(col);
  free(dcol);
  free(dyt);
  return HPU_SUCCESS;
}

hpu_status_t hpu_conv_execute(const hpu_node_t *n) {
  return n->op == HPU_OP_CONV ? conv_forward(n) : conv_backward(n);
}
