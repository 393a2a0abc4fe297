/* The convolution of conv.c for one element type, included there with T
 * (float / double / int64_t), DT (its hpu dtype) and FN(x) (the name's
 * suffix): the GEMMs run on the matmul kernel in that dtype (float64:
 * OpenBLAS dgemm; int64: its exact, wrapping integer loop), im2col /
 * col2im move T. The float copy is the float code it always was. */

/* ---- GEMMs through the matmul kernel ---------------------------------- */

static hpu_tensor_t FN(view)(const T *base, int nd, const int64_t *sz, const int64_t *st) {
  hpu_tensor_t t;
  t.storage = (void *)base;
  t.offset = 0;
  t.dtype = DT;
  t.ndim = nd;
  for (int d = 0; d < nd; d++) t.sizes[d] = sz[d], t.strides[d] = st[d];
  return t;
}

/* c = a @ b (+ add, broadcast to c, when add is given; add may be c). */
static void FN(mm)(hpu_tensor_t a, hpu_tensor_t b, hpu_tensor_t c, const hpu_tensor_t *add) {
  hpu_node_t n;
  n.op = HPU_OP_MATMUL;
  n.num_inputs = add ? 3 : 2;
  n.num_outputs = 1;
  n.compute_dtype = DT;
  n.inputs[0] = a;
  n.inputs[1] = b;
  if (add) n.inputs[2] = *add;
  n.outputs[0] = c;
  n.params.matmul.alpha = hpu_scalar_float(1);
  n.params.matmul.beta = hpu_scalar_float(1);
  hpu_kernel_matmul(&n);
}

typedef struct {
  const geo_t *g;
  blk_t b;
  const T *x; /* im2col source */
  T *dx;      /* col2im destination */
  T *col;
} FN(panel_t);

static void FN(im2col_rows)(void *ctx, int64_t r_begin, int64_t r_end) {
  const FN(panel_t) *p = ctx;
  const geo_t *g = p->g;
  for (int64_t r = r_begin; r < r_end; r++) {
    int64_t gi = r / g->K, k = r % g->K;
    int64_t c = k / (g->KH * g->KW), kh = k / g->KW % g->KH, kw = k % g->KW;
    int64_t lo, hi;
    valid_cols(g, kw, &lo, &hi);
    int64_t ioff = kw * g->dw - g->pw;
    T *dst = p->col + r * p->b.L;
    for (int64_t b = 0; b < p->b.nb; b++) {
      const T *plane = p->x + ((p->b.n0 + b) * g->C + gi * g->Cg + c) * g->H * g->W;
      for (int64_t oh = p->b.r0; oh < p->b.r0 + p->b.nr; oh++, dst += g->OW) {
        int64_t ih = oh * g->sh - g->ph + kh * g->dh;
        if (ih < 0 || ih >= g->H) {
          memset(dst, 0, (size_t)g->OW * sizeof(T));
          continue;
        }
        const T *src = plane + ih * g->W + ioff;
        for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
        if (g->sw == 1) {
          memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(T));
        } else {
          for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->sw];
        }
        for (int64_t ow = hi; ow < g->OW; ow++) dst[ow] = 0;
      }
    }
  }
}

/* dx planes (b, g, c) += the panel's columns that came from them. */
static void FN(col2im_planes)(void *ctx, int64_t q_begin, int64_t q_end) {
  const FN(panel_t) *p = ctx;
  const geo_t *g = p->g;
  for (int64_t q = q_begin; q < q_end; q++) {
    int64_t b = q / g->C, ch = q % g->C, gi = ch / g->Cg, c = ch % g->Cg;
    T *plane = p->dx + ((p->b.n0 + b) * g->C + ch) * g->H * g->W;
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t k = (c * g->KH + kh) * g->KW + kw;
        int64_t lo, hi;
        valid_cols(g, kw, &lo, &hi);
        int64_t ioff = kw * g->dw - g->pw;
        const T *src = p->col + (gi * g->K + k) * p->b.L + b * p->b.nr * g->OW;
        for (int64_t oh = p->b.r0; oh < p->b.r0 + p->b.nr; oh++, src += g->OW) {
          int64_t ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H) continue;
          T *dst = plane + ih * g->W + ioff;
          for (int64_t ow = lo; ow < hi; ow++) dst[ow * g->sw] += src[ow];
        }
      }
  }
}

static void FN(run_im2col)(FN(panel_t) *p) {
  int64_t rows = p->g->G * p->g->K;
  int64_t grain = 65536 / (p->b.L + 1) + 1;
  hpu_parallel_for(rows, grain, FN(im2col_rows), p);
}

/* [G, Cog, L] view of a tensor [N, Co, OH*OW] (y or dy) for block b: a direct
 * view when the block is one image, else NULL (the caller goes through a
 * [G, Cog, nb, rows] buffer). */
static hpu_tensor_t FN(out_block_view)(const geo_t *g, const T *y, const blk_t *b) {
  int64_t sz[4] = {g->G, g->Cog, b->nb, b->nr * g->OW};
  int64_t st[4] = {g->Cog * g->P, g->P, g->Co * g->P, 1};
  return FN(view)(y + b->n0 * g->Co * g->P + b->r0 * g->OW, 4, sz, st);
}

static hpu_tensor_t FN(buf3)(const T *base, int64_t a, int64_t b, int64_t c) {
  int64_t sz[3] = {a, b, c}, st[3] = {b * c, c, 1};
  return FN(view)(base, 3, sz, st);
}

/* dy (or y) of block b as [G, Cog, L]: a view of dy for one image, else
 * copied into dyt (the images' columns side by side). */
static hpu_tensor_t FN(block_dy)(const geo_t *g, const T *dy, const blk_t *b, T *dyt) {
  hpu_tensor_t src = FN(out_block_view)(g, dy, b);
  if (b->nb > 1) {
    hpu_tensor_t t = FN(view)(dyt, 4, src.sizes, (int64_t[4]){g->Cog * b->L, b->L, b->nr * g->OW, 1});
    hpu_copy_tensor(&t, &src);
    return FN(buf3)(dyt, g->G, g->Cog, b->L);
  }
  src.ndim = 3;
  src.sizes[2] = b->L;
  src.strides[2] = 1;
  return src;
}

/* ---- forward ------------------------------------------------------------ */

static hpu_status_t FN(conv_forward)(const hpu_node_t *n) {
  const hpu_tensor_t *xt = &n->inputs[0], *wt = &n->inputs[1];
  geo_t g = geometry(n, xt, wt);
  const T *x = hpu_tensor_data(xt), *w = hpu_tensor_data(wt);
  T *y = hpu_tensor_data(&n->outputs[0]);
  int has_b = n->params.nn.i[1] != 0;
  const T *bias = has_b ? hpu_tensor_data(&n->inputs[2]) : NULL;
  hpu_tensor_t W = FN(buf3)(w, g.G, g.Cog, g.K);
  if (is_pointwise(&g)) {
    int64_t xs[4] = {g.N, g.G, g.Cg, g.P}, xst[4] = {g.C * g.P, g.Cg * g.P, g.P, 1};
    int64_t ys[4] = {g.N, g.G, g.Cog, g.P}, yst[4] = {g.Co * g.P, g.Cog * g.P, g.P, 1};
    int64_t bs[4] = {1, g.G, g.Cog, 1}, bst[4] = {0, g.Cog, 1, 0};
    hpu_tensor_t bt = FN(view)(bias, 4, bs, bst);
    FN(mm)(W, FN(view)(x, 4, xs, xst), FN(view)(y, 4, ys, yst), has_b ? &bt : NULL);
    return HPU_SUCCESS;
  }
#ifdef CONV_IGEMM /* float32 on AVX-512 and AVX2: Winograd for 3x3 / 1 (conv_winograd.c); on AVX-512
                     only, large stride-2 images read from the input's phase planes (conv_direct.c);
                     else patches gathered into the GEMM's panels (conv_igemm.c) */
  hpu_conv_winograd_t wg;
  if (winograd_shape(&g, &wg) && hpu_conv_winograd_suits(&wg)) return hpu_conv_winograd(&wg, x, w, bias, y);
  if (g.G == 1) {
    hpu_conv_igemm_t ig = {g.N, g.C, g.H, g.W, g.Co, g.KH, g.KW, g.OH, g.OW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
    if (hpu_conv_direct_suits(&ig)) return hpu_conv_direct(&ig, x, w, bias, y);
    if (hpu_conv_igemm_suits(&ig)) return hpu_conv_igemm(&ig, x, w, bias, y);
  }
#endif
  int64_t band;
  FN(panel_t) p = {&g, first_block(&g, &band, sizeof(T)), x, NULL, NULL};
  hpu_scratch_buf_t colb = {0}, tmpb = {0};
  p.col = hpu_scratch_take(&colb, (size_t)(g.G * g.K * p.b.L) * sizeof(T));
  /* several images per block: the GEMM writes [G, Cog, nb, pixels] here */
  T *tmp = p.b.nb > 1 ? hpu_scratch_take(&tmpb, (size_t)(g.G * g.Cog * p.b.L) * sizeof(T)) : NULL;
  if (!p.col || (p.b.nb > 1 && !tmp)) {
    hpu_scratch_give(&colb);
    hpu_scratch_give(&tmpb);
    return oom();
  }
  int64_t bs[3] = {g.G, g.Cog, 1}, bst[3] = {g.Cog, 1, 0};
  hpu_tensor_t bt = FN(view)(bias, 3, bs, bst);
  do {
    FN(run_im2col)(&p);
    hpu_tensor_t dst = FN(out_block_view)(&g, y, &p.b);
    hpu_tensor_t c = p.b.nb > 1 ? FN(buf3)(tmp, g.G, g.Cog, p.b.L) : dst;
    if (p.b.nb == 1) { /* [G, Cog, 1, pixels] -> [G, Cog, pixels] */
      c.ndim = 3;
      c.sizes[2] = p.b.L;
      c.strides[2] = 1;
    }
    FN(mm)(W, FN(buf3)(p.col, g.G, g.K, p.b.L), c, has_b ? &bt : NULL);
    if (p.b.nb > 1) {
      hpu_tensor_t src = FN(view)(tmp, 4, dst.sizes, (int64_t[4]){g.Cog * p.b.L, p.b.L, p.b.nr * g.OW, 1});
      hpu_copy_tensor(&dst, &src);
    }
  } while (next_block(&g, band, &p.b));
  hpu_scratch_give(&colb);
  hpu_scratch_give(&tmpb);
  return HPU_SUCCESS;
}

/* ---- backward ----------------------------------------------------------- */

typedef struct {
  const geo_t *g;
  const T *dy;
  T *db;
} FN(bias_ctx_t);

static void FN(bias_grad)(void *ctx, int64_t c0, int64_t c1) {
  const FN(bias_ctx_t) *b = ctx;
  const geo_t *g = b->g;
  for (int64_t c = c0; c < c1; c++) {
    double s = 0;
    for (int64_t n = 0; n < g->N; n++) {
      const T *row = b->dy + (n * g->Co + c) * g->P;
      for (int64_t q = 0; q < g->P; q++) s += row[q];
    }
    b->db[c] = (T)s;
  }
}

/* With stride 1, dx is the forward convolution of dy with the weight
 * flipped in space and transposed per group (W'[g, ci, co, KH-1-kh,
 * KW-1-kw] = W[g, co, ci, kh, kw]) and padding dil * (k - 1) - pad: the
 * GEMM then has k = Cog * KH * KW and writes [Cg, pixels], where the
 * col2im route (k = Cog) writes a K-row panel and adds it back, measured
 * 1.6x slower on ResNet's 3x3 64->64 at 56x56. */
static hpu_status_t FN(dx_as_convolution)(const hpu_node_t *n, const geo_t *g, const T *dy, const T *w,
                                      T *dx) {
  int64_t KK = g->KH * g->KW;
  hpu_scratch_buf_t wtb;
  T *wt = hpu_scratch_take(&wtb, (size_t)(g->Co * g->Cg * KK) * sizeof(T));
  if (!wt) return oom();
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t co = 0; co < g->Cog; co++)
      for (int64_t ci = 0; ci < g->Cg; ci++) {
        const T *src = w + ((gi * g->Cog + co) * g->Cg + ci) * KK;
        T *dst = wt + ((gi * g->Cg + ci) * g->Cog + co) * KK;
        for (int64_t k = 0; k < KK; k++) dst[k] = src[KK - 1 - k];
      }
  hpu_node_t f;
  f.op = HPU_OP_CONV;
  f.num_inputs = 2;
  f.num_outputs = 1;
  f.compute_dtype = DT;
  int64_t ds[4] = {g->N, g->Co, g->OH, g->OW}, dst[4] = {g->Co * g->P, g->P, g->OW, 1};
  int64_t ws[4] = {g->C, g->Cog, g->KH, g->KW}, wst[4] = {g->Cog * KK, KK, g->KW, 1};
  int64_t xs[4] = {g->N, g->C, g->H, g->W}, xst[4] = {g->C * g->H * g->W, g->H * g->W, g->W, 1};
  f.inputs[0] = FN(view)(dy, 4, ds, dst);
  f.inputs[1] = FN(view)(wt, 4, ws, wst);
  f.outputs[0] = FN(view)(dx, 4, xs, xst);
  f.params = n->params;
  f.params.nn.i[1] = 0; /* no bias */
  f.params.nn.strides[0] = g->dh * (g->KH - 1) - g->ph;
  f.params.nn.strides[1] = g->dw * (g->KW - 1) - g->pw;
  hpu_status_t st = FN(conv_forward)(&f);
  hpu_scratch_give(&wtb);
  return st;
}

#ifdef CONV_IGEMM
/* ---- backward by image chunks (float32) -------------------------------- */

/* dW = sum over the images of dy_block @ col^T has a small output when the
 * channels are few (16 -> 16 at 3x3: [16 x 144]) and a long sum (every
 * pixel of every image). Cut by output tiles, that product gives each of
 * two threads a sliver and every block pays a parallel region: the CIFAR
 * ResNet-18's 3x3 16->16 at 32x32, batch 64, took 19.9 ms against torch's
 * 1.9 (Zen 4 class). So the images are cut into a fixed number of chunks
 * instead; each chunk's sum runs on one thread (its GEMMs serial) into its
 * own partial, and the partials are added in chunk order: the same rounding
 * on any number of threads. That shape then took 3.0 ms, and ResNet-50's
 * 3x3 64->64 at 56x56, batch 8, 10.4-11.0 ms instead of 25.1 (torch: 14.5).
 * Larger partials stay with the output-tiled product, which splits well.
 * The col2im dx (stride 2) is cut the same way, for the same reason, and
 * needs no partials: each image's dx is its own chunk's. */
#define DW_CHUNKS 8
#define DW_PARTIAL_MAX (64 * 1024) /* floats in one partial dW */

typedef struct {
  const geo_t *g;
  const T *x, *dy, *w;
  T *dw;       /* NULL, or chunk 0's sum, then the total */
  T *partials; /* chunks 1..nchunk-1, G * Cog * K floats each */
  T *dx;       /* NULL, or dx by col2im */
  int64_t nchunk, per;
  int kernel;
  atomic_int failed;
} FN(chunks_t);

static int FN(chunk_kernel)(void) {
  hpu_isa_t isa = hpu_kernels_isa();
  return isa >= HPU_ISA_AVX512 ? HPU_GEMM_F32FMA : isa >= HPU_ISA_AVX2 ? HPU_GEMM_F32AVX2 : HPU_GEMM_NONE;
}

static int FN(dw_by_images)(const geo_t *g) {
  return g->N >= 2 && g->Cog >= 8 && g->K >= 8 && g->G * g->Cog * g->K <= DW_PARTIAL_MAX &&
         FN(chunk_kernel)() != HPU_GEMM_NONE;
}

/* Each chunk reads all of W in every block, on its own thread: measured
 * (bench/conv.py shapes, batch 8-16, Zen 4 class) faster by chunks up to
 * 128->256 at 3x3 (295K weights: 10.5 against 11.1 ms), slower from
 * 256->512 at 3x3 (1.2M: 12.5 against 10.6) and 1x1 1024->2048 (2.1M:
 * 14.8 against 9.7), where the output-tiled product shares W's panels. */
#define DX_WEIGHTS_MAX (512 * 1024)

static int FN(dx_by_images)(const geo_t *g) {
  return g->N >= 2 && g->G * g->Cog * g->K <= DX_WEIGHTS_MAX && FN(chunk_kernel)() != HPU_GEMM_NONE;
}

/* One chunk: images [n0, n1), block by block: dW summed into out, dx
 * (zeroed first) by col2im of W^T @ dy. */
static int FN(chunk)(const FN(chunks_t) *c, int64_t n0, int64_t n1, T *out) {
  geo_t g = *c->g;
  g.N = n1 - n0;
  int64_t band;
  FN(panel_t) p = {&g, first_block(&g, &band, sizeof(T)), c->x + n0 * g.C * g.H * g.W,
                   c->dx ? c->dx + n0 * g.C * g.H * g.W : NULL, NULL};
  const T *dy = c->dy + n0 * g.Co * g.P;
  size_t panel = (size_t)(g.G * g.K * p.b.L);
  hpu_scratch_buf_t colb = {0}, dcolb = {0}, dytb = {0};
  T *col = out ? hpu_scratch_take(&colb, panel * sizeof(T)) : NULL;
  T *dcol = p.dx ? hpu_scratch_take(&dcolb, panel * sizeof(T)) : NULL;
  T *dyt = p.b.nb > 1 ? hpu_scratch_take(&dytb, (size_t)(g.G * g.Cog * p.b.L) * sizeof(T)) : NULL;
  int ok = (!out || col) && (!p.dx || dcol) && (p.b.nb == 1 || dyt);
  if (ok && p.dx) memset(p.dx, 0, (size_t)(g.N * g.C * g.H * g.W) * sizeof(T));
  for (int first = 1; ok; first = 0) {
    hpu_tensor_t D = FN(block_dy)(&g, dy, &p.b, dyt);
    const T *a = hpu_tensor_data(&D);
    int64_t ars = D.strides[1], astep = D.strides[0];
    if (out) {
      p.col = col;
      FN(run_im2col)(&p); /* inline: this thread runs a chunk */
      for (int64_t gi = 0; gi < g.G && ok; gi++) {
        hpu_gemm_t gg = {g.Cog, g.K, p.b.L, a + gi * astep, ars, 1, col + gi * g.K * p.b.L, 1, p.b.L,
                         out + gi * g.Cog * g.K, g.K, 1, DT, 1.0f, first ? 0.0f : 1.0f};
        ok = hpu_gemm_run(&gg, c->kernel) == 0;
      }
    }
    if (p.dx && ok) {
      p.col = dcol;
      for (int64_t gi = 0; gi < g.G && ok; gi++) { /* dcol [K, L] = W^T [K, Cog] @ dy [Cog, L] */
        hpu_gemm_t gg = {g.K, p.b.L, g.Cog, c->w + gi * g.Cog * g.K, 1, g.K, a + gi * astep, ars, 1,
                         dcol + gi * g.K * p.b.L, p.b.L, 1, DT, 1.0f, 0.0f};
        ok = hpu_gemm_run(&gg, c->kernel) == 0;
      }
      if (ok) FN(col2im_planes)(&p, 0, p.b.nb * g.C);
    }
    if (!next_block(&g, band, &p.b)) break;
  }
  hpu_scratch_give(&colb);
  hpu_scratch_give(&dcolb);
  hpu_scratch_give(&dytb);
  return ok;
}

static void FN(chunk_range)(void *ctx, int64_t c0, int64_t c1) {
  FN(chunks_t) *c = ctx;
  for (int64_t ci = c0; ci < c1; ci++) {
    int64_t n0 = c->g->N * ci / c->nchunk, n1 = c->g->N * (ci + 1) / c->nchunk;
    T *out = !c->dw ? NULL : ci == 0 ? c->dw : c->partials + (ci - 1) * c->per;
    if (!FN(chunk)(c, n0, n1, out)) atomic_store(&c->failed, 1);
  }
}

static void FN(dw_sum_partials)(void *ctx, int64_t e0, int64_t e1) {
  const FN(chunks_t) *c = ctx;
  for (int64_t e = e0; e < e1; e++) {
    T s = c->dw[e];
    for (int64_t ci = 1; ci < c->nchunk; ci++) s += c->partials[(ci - 1) * c->per + e];
    c->dw[e] = s;
  }
}

/* dw and / or dx (either may be NULL) by image chunks. */
static hpu_status_t FN(backward_by_images)(const geo_t *g, const T *x, const T *dy, const T *w, T *dw, T *dx) {
  FN(chunks_t) c = {g, x, dy, w, dw, NULL, dx, g->N < DW_CHUNKS ? g->N : DW_CHUNKS, g->G * g->Cog * g->K,
                    FN(chunk_kernel)(), 0};
  hpu_scratch_buf_t partb = {0};
  if (dw) {
    c.partials = hpu_scratch_take(&partb, (size_t)((c.nchunk - 1) * c.per) * sizeof(T));
    if (!c.partials) return oom();
  }
  hpu_parallel_for(c.nchunk, 1, FN(chunk_range), &c);
  if (dw && !atomic_load(&c.failed)) hpu_parallel_for(c.per, 4096, FN(dw_sum_partials), &c);
  hpu_scratch_give(&partb);
  return atomic_load(&c.failed) ? oom() : HPU_SUCCESS;
}
#endif

static hpu_status_t FN(conv_backward)(const hpu_node_t *n) {
  const hpu_tensor_t *xt = &n->inputs[1], *wt = &n->inputs[2];
  geo_t g = geometry(n, xt, wt);
  int64_t mask = n->params.nn.i[1];
  const T *dy = hpu_tensor_data(&n->inputs[0]), *x = hpu_tensor_data(xt), *w = hpu_tensor_data(wt);
  T *dx = mask & 1 ? hpu_tensor_data(&n->outputs[0]) : NULL;
  T *dw = mask & 2 ? hpu_tensor_data(&n->outputs[1]) : NULL;
  if (mask & 4) {
    FN(bias_ctx_t) b = {&g, dy, hpu_tensor_data(&n->outputs[2])};
    hpu_parallel_for(g.Co, 1, FN(bias_grad), &b);
  }
  if (!dx && !dw) return HPU_SUCCESS;
  if (g.N == 0) { /* no images: dW is zero, dx empty */
    if (dw) memset(dw, 0, (size_t)(g.Co * g.K) * sizeof(T));
    return HPU_SUCCESS;
  }
  /* W^T per group: [G, K, Cog] */
  int64_t wts[3] = {g.G, g.K, g.Cog}, wtst[3] = {g.Cog * g.K, 1, g.K};
  hpu_tensor_t WT = FN(view)(w, 3, wts, wtst);
  int pointwise_dx = dx && is_pointwise(&g);
  if (pointwise_dx) {
    int64_t xs[4] = {g.N, g.G, g.Cg, g.P}, xst[4] = {g.C * g.P, g.Cg * g.P, g.P, 1};
    int64_t ys[4] = {g.N, g.G, g.Cog, g.P}, yst[4] = {g.Co * g.P, g.Cog * g.P, g.P, 1};
    FN(mm)(WT, FN(view)(dy, 4, ys, yst), FN(view)(dx, 4, xs, xst), NULL);
    dx = NULL;
    if (!dw) return HPU_SUCCESS;
  }
  if (dx && g.sh == 1 && g.sw == 1 && g.ph <= g.dh * (g.KH - 1) && g.pw <= g.dw * (g.KW - 1)) {
    HPU_TRY(FN(dx_as_convolution)(n, &g, dy, w, dx));
    dx = NULL;
    if (!dw) return HPU_SUCCESS;
  }
#ifdef CONV_IGEMM
  hpu_conv_winograd_t wg;
  if (dw && winograd_shape(&g, &wg) && hpu_conv_winograd_dw_suits(&wg)) {
    HPU_TRY(hpu_conv_winograd_dw(&wg, x, dy, dw));
    dw = NULL;
    if (!dx) return HPU_SUCCESS;
  }
  {
    T *cdw = dw && FN(dw_by_images)(&g) ? dw : NULL, *cdx = dx && FN(dx_by_images)(&g) ? dx : NULL;
    if (cdw || cdx) {
      HPU_TRY(FN(backward_by_images)(&g, x, dy, w, cdw, cdx));
      if (cdw) dw = NULL;
      if (cdx) dx = NULL;
      if (!dw && !dx) return HPU_SUCCESS;
    }
  }
#endif
  if (dx) memset(dx, 0, (size_t)(g.N * g.C * g.H * g.W) * sizeof(T));
  int64_t band;
  FN(panel_t) p = {&g, first_block(&g, &band, sizeof(T)), x, dx, NULL};
  size_t panel = (size_t)(g.G * g.K * p.b.L);
  hpu_scratch_buf_t colb = {0}, dcolb = {0}, dytb = {0};
  T *col = dw ? hpu_scratch_take(&colb, panel * sizeof(T)) : NULL;
  T *dcol = dx ? hpu_scratch_take(&dcolb, panel * sizeof(T)) : NULL;
  T *dyt = p.b.nb > 1 ? hpu_scratch_take(&dytb, (size_t)(g.G * g.Cog * p.b.L) * sizeof(T)) : NULL;
  if ((dw && !col) || (dx && !dcol) || (p.b.nb > 1 && !dyt)) {
    hpu_scratch_give(&colb);
    hpu_scratch_give(&dcolb);
    hpu_scratch_give(&dytb);
    return oom();
  }
  hpu_tensor_t DW = FN(buf3)(dw, g.G, g.Cog, g.K);
  int first = 1;
  do {
    hpu_tensor_t D = FN(block_dy)(&g, dy, &p.b, dyt);
    if (dw) {
      p.col = col;
      FN(run_im2col)(&p);
      int64_t cs[3] = {g.G, p.b.L, g.K}, cst[3] = {g.K * p.b.L, 1, p.b.L};
      FN(mm)(D, FN(view)(col, 3, cs, cst), DW, first ? NULL : &DW);
    }
    if (dx) {
      p.col = dcol;
      FN(mm)(WT, D, FN(buf3)(dcol, g.G, g.K, p.b.L), NULL);
      hpu_parallel_for(p.b.nb * g.C, 1, FN(col2im_planes), &p);
    }
    first = 0;
  } while (next_block(&g, band, &p.b));
  hpu_scratch_give(&colb);
  hpu_scratch_give(&dcolb);
  hpu_scratch_give(&dytb);
  return HPU_SUCCESS;
}
