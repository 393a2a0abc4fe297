/* Reductions (HPU_OP_REDUCE), max/min with indices (HPU_OP_ARGREDUCE) and
 * cumsum.
 *
 * A reduction splits the input's dims into kept dims K (one output element
 * per position) and reduced dims R. R is ordered by stride, innermost first,
 * and contiguous neighbours are coalesced, so R is walked in runs along its
 * innermost dim; each run feeds an accumulator. Float sums run in blocks of
 * 4096 elements over 64 float lanes (vectorised; AVX2/AVX-512 clones), each
 * block's float total added into a double: at least as accurate as
 * PyTorch's cascade sum; 64 lanes = four independent AVX-512 add chains,
 * so the loop runs at load speed instead of add latency. Outputs are split over the thread pool; when there
 * are fewer outputs than threads and many elements per output, each output's
 * R is split in fixed blocks (deterministic for any thread count) whose
 * partial accumulators are merged in order. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/nn_util.h"
#include "kernels/v16.h"
#include "runtime/schedule_policy.h" /* HPU_GRAIN */

#define MAXD HPU_MAX_DIMS
#define SPLIT_BLOCK HPU_REDUCE_SPLIT_BLOCK

typedef struct {
  int nk, nr;
  int64_t M, L;
  int64_t ksz[MAXD], kin[MAXD], kout[2][MAXD]; /* innermost first; byte strides */
  int64_t rsz[MAXD], rin[MAXD], rout[MAXD];
  const char *in;
  char *out[2];
  hpu_dtype_t dti, dto[2];
  int nout;
  int kind;
  double p;    /* NORM p, VAR correction */
  int imode;   /* integer accumulation (SUM/PROD/AMAX/AMIN on integers) */
} red_t;

typedef struct {
  double s, c; /* c: the mean in VAR's second pass */
  int64_t i;
  int nan;
} acc_t;

/* Geometry ------------------------------------------------------------------ */

static void build(red_t *r, const hpu_tensor_t *in, const hpu_tensor_t *const *outs, int nout,
                  uint64_t mask, int coalesce) {
  int64_t es = (int64_t)hpu_dtype_size(in->dtype);
  r->nk = r->nr = 0;
  r->M = r->L = 1;
  r->in = hpu_tensor_data(in);
  r->dti = in->dtype;
  r->nout = nout;
  for (int k = 0; k < nout; k++) {
    r->out[k] = hpu_tensor_data(outs[k]);
    r->dto[k] = outs[k]->dtype;
  }
  for (int d = in->ndim - 1; d >= 0; d--) {
    int64_t sz = in->sizes[d];
    if ((mask >> d) & 1) {
      r->L *= sz;
      if (sz == 1) continue;
      r->rsz[r->nr] = sz;
      r->rin[r->nr] = in->strides[d] * es;
      r->rout[r->nr] = nout ? outs[0]->strides[d] * (int64_t)hpu_dtype_size(outs[0]->dtype) : 0;
      r->nr++;
    } else {
      r->M *= sz;
      if (sz == 1) continue;
      r->ksz[r->nk] = sz;
      r->kin[r->nk] = in->strides[d] * es;
      for (int k = 0; k < nout; k++)
        r->kout[k][r->nk] = outs[k]->strides[d] * (int64_t)hpu_dtype_size(outs[k]->dtype);
      r->nk++;
    }
  }
  if (coalesce && r->nr > 1) {
    /* innermost (smallest stride) first */
    for (int i = 1; i < r->nr; i++)
      for (int j = i; j > 0 && r->rin[j] < r->rin[j - 1]; j--) {
        int64_t t = r->rin[j]; r->rin[j] = r->rin[j - 1]; r->rin[j - 1] = t;
        t = r->rsz[j]; r->rsz[j] = r->rsz[j - 1]; r->rsz[j - 1] = t;
      }
    int n = 0;
    for (int i = 1; i < r->nr; i++) {
      if (r->rin[i] == r->rin[n] * r->rsz[n]) {
        r->rsz[n] *= r->rsz[i];
      } else {
        n++;
        r->rsz[n] = r->rsz[i];
        r->rin[n] = r->rin[i];
      }
    }
    r->nr = n + 1;
  }
  if (r->nr == 0) {
    r->nr = 1;
    r->rsz[0] = 1;
    r->rin[0] = 0;
    r->rout[0] = 0;
  }
}

/* Offsets of output position m in the input and outputs. */
static void kept_offsets(const red_t *r, int64_t m, int64_t *in_off, int64_t *out_off) {
  int64_t io = 0, o0 = 0, o1 = 0;
  for (int d = 0; d < r->nk; d++) {
    int64_t c = m % r->ksz[d];
    m /= r->ksz[d];
    io += c * r->kin[d];
    o0 += c * r->kout[0][d];
    if (r->nout > 1) o1 += c * r->kout[1][d];
  }
  *in_off = io;
  out_off[0] = o0;
  out_off[1] = o1;
}

/* Vectorised sums over contiguous runs ------------------------------------- */

#define SQ_ID(v) (v)
#define SQ_SQ(v) ((v) * (v))
#define SQ_ABS(v) fabsf(v)
#define VSQ_ID(v) (v)
#define VSQ_SQ(v) ((v) * (v))

/* The float32 sums' lane vectors: 256-bit ones in the AVX-512 clone too. A
 * sum reads its input once, mostly from DRAM, and on a Zen 4 class EPYC a C
 * harness streaming 64 MB read faster with 256-bit loads than with 512-bit
 * ones, and [16384, 1024].sum(-1) came closer to torch. bfloat16 sums keep
 * 512-bit vectors: widening 8 at a time made them slower. The lane order,
 * and so the bits, are the same either way. */
#define F32_VT_avx512 vf8_t
#define F32_VT_avx2 vf8_t
#define F32_VT_generic vf4_t

/* Adds VOPF of the 16 elements at p, loaded by VLD, into the lane group g. */
#define SUM_ACC16(VT, g, VLD, VOPF, p) \
  for (int gi_ = 0; gi_ < VNV(VT); gi_++) g[gi_] += VOPF(VLD(VT, (p) + gi_ * VW(VT)))

/* Lane j of the 64 sums in block b = element b*4096 + 64i + j; the lanes
 * fold as j += j + 32, j += j + 16, j += j + 8, then the elements past the
 * last whole 64 and lanes 0..7 are added in order: the same order on every
 * ISA, so sums and sums of magnitudes have the same bits on every ISA (sums
 * of squares may differ in the last bit where the FMA clones fuse x*x + a). */
#define DEF_SUM(NAME, T, LD, VLD, OPF, VOPF, VT, ISA)                           \
  static HPU_ATTR_##ISA double NAME##_##ISA(const void *pv, int64_t n) {        \
    const T *p = pv;                                                            \
    double total = 0;                                                           \
    for (int64_t b = 0; b < n; b += 4096) {                                     \
      int64_t m = n - b < 4096 ? n - b : 4096;                                  \
      const T *q = p + b;                                                       \
      G_DECL4(VT, a, 0);                                                        \
      int64_t i = 0;                                                            \
      for (; i + 64 <= m; i += 64) {                                            \
        SUM_ACC16(VT, a0, VLD, VOPF, q + i);                                    \
        SUM_ACC16(VT, a1, VLD, VOPF, q + i + 16);                               \
        SUM_ACC16(VT, a2, VLD, VOPF, q + i + 32);                               \
        SUM_ACC16(VT, a3, VLD, VOPF, q + i + 48);                               \
      }                                                                         \
      float t = 0;                                                              \
      for (; i < m; i++) {                                                      \
        float v = LD(q[i]);                                                     \
        t += OPF(v);                                                            \
      }                                                                         \
      G_ADD(VT, a0, a2);                                                        \
      G_ADD(VT, a1, a3);                                                        \
      G_ADD(VT, a0, a1);                                                        \
      for (int j = 0; j < 8; j++)                                               \
        t += G_LANE(VT, a0, j) + G_LANE(VT, a0, j + 8);                         \
      total += t;                                                               \
    }                                                                           \
    return total;                                                               \
  }

#define DEF_SUM_SET(ISA)                                \
  DEF_SUM(sum_f32, float, LD_F32, VLD_F32, SQ_ID, VSQ_ID, F32_VT_##ISA, ISA)          \
  DEF_SUM(sumsq_f32, float, LD_F32, VLD_F32, SQ_SQ, VSQ_SQ, F32_VT_##ISA, ISA)        \
  DEF_SUM(sumabs_f32, float, LD_F32, VLD_F32, SQ_ABS, VSQ_ABS, F32_VT_##ISA, ISA)     \
  DEF_SUM(sum_bf16, uint16_t, LD_BF16, VLD_BF16, SQ_ID, VSQ_ID, VT_##ISA, ISA)        \
  DEF_SUM(sumsq_bf16, uint16_t, LD_BF16, VLD_BF16, SQ_SQ, VSQ_SQ, VT_##ISA, ISA)      \
  DEF_SUM(sumabs_bf16, uint16_t, LD_BF16, VLD_BF16, SQ_ABS, VSQ_ABS, VT_##ISA, ISA)

DEF_SUM_SET(generic)
#if HPU_HAVE_ISA_CLONES
DEF_SUM_SET(avx2)
DEF_SUM_SET(avx512)
#endif

typedef double (*sum_fn)(const void *, int64_t);
enum { S_SUM, S_SQ, S_ABS };

/* The contiguous sum loop for `which` over dtype dt (float32 or bfloat16). */
static sum_fn pick_sum(int which, hpu_dtype_t dt) {
  hpu_isa_t isa = hpu_kernels_isa();
#if HPU_HAVE_ISA_CLONES
#define PICK(NAME)                                                  \
  return isa == HPU_ISA_AVX512 ? NAME##_avx512                       \
         : isa == HPU_ISA_AVX2 ? NAME##_avx2                         \
                               : NAME##_generic
#else
#define PICK(NAME) (void)isa; return NAME##_generic
#endif
  if (dt == HPU_FLOAT32) {
    if (which == S_SUM) { PICK(sum_f32); }
    if (which == S_SQ) { PICK(sumsq_f32); }
    PICK(sumabs_f32);
  }
  if (which == S_SUM) { PICK(sum_bf16); }
  if (which == S_SQ) { PICK(sumsq_bf16); }
  PICK(sumabs_bf16);
#undef PICK
}

static double fast_sum(int which, hpu_dtype_t dt, const void *p, int64_t n) {
  return pick_sum(which, dt)(p, n);
}

/* Accumulators --------------------------------------------------------------- */

static void acc_init(const red_t *r, acc_t *a) {
  a->s = 0;
  a->c = 0;
  a->i = 0;
  a->nan = 0;
  switch (r->kind) {
    case HPU_REDUCE_PROD: a->s = 1; a->i = 1; break;
    case HPU_REDUCE_AMAX: a->s = -INFINITY; a->i = INT64_MIN; break;
    case HPU_REDUCE_AMIN: a->s = INFINITY; a->i = INT64_MAX; break;
    case HPU_REDUCE_ALL: a->i = 1; break;
    case HPU_REDUCE_NORM:
      if (r->p == -INFINITY) a->s = INFINITY;
      break;
    default: break;
  }
}

static void acc_merge(const red_t *r, acc_t *a, const acc_t *b) {
  switch (r->kind) {
    case HPU_REDUCE_PROD: a->s *= b->s; a->i = (int64_t)((uint64_t)a->i * (uint64_t)b->i); break;
    case HPU_REDUCE_AMAX:
      a->nan |= b->nan;
      if (b->s > a->s) a->s = b->s;
      if (b->i > a->i) a->i = b->i;
      break;
    case HPU_REDUCE_AMIN:
      a->nan |= b->nan;
      if (b->s < a->s) a->s = b->s;
      if (b->i < a->i) a->i = b->i;
      break;
    case HPU_REDUCE_ANY: a->i |= b->i; break;
    case HPU_REDUCE_ALL: a->i &= b->i; break;
    case HPU_REDUCE_NORM:
      a->nan |= b->nan;
      if (r->p == INFINITY) { if (b->s > a->s) a->s = b->s; }
      else if (r->p == -INFINITY) { if (b->s < a->s) a->s = b->s; }
      else a->s += b->s;
      break;
    default: a->s += b->s; a->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i); break;
  }
}

/* Feeds a run of n elements at p (byte stride st) into a. */
static void acc_run(const red_t *r, acc_t *a, const char *p, int64_t st, int64_t n, int pass) {
  hpu_dtype_t dt = r->dti;
  int64_t es = (int64_t)hpu_dtype_size(dt);
  int contig = st == es && hpu_nn_row_dtype(dt);
  switch (r->kind) {
    case HPU_REDUCE_SUM: case HPU_REDUCE_MEAN:
      if (r->imode) {
        uint64_t s = 0;
        for (int64_t k = 0; k < n; k++) s += (uint64_t)hpu_load_i64(p + k * st, dt);
        a->i = (int64_t)((uint64_t)a->i + s);
      } else if (contig) {
        a->s += fast_sum(S_SUM, dt, p, n);
      } else {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += hpu_load_f64(p + k * st, dt);
        a->s += s;
      }
      break;
    case HPU_REDUCE_PROD:
      if (r->imode) {
        for (int64_t k = 0; k < n; k++)
          a->i = (int64_t)((uint64_t)a->i * (uint64_t)hpu_load_i64(p + k * st, dt));
      } else {
        for (int64_t k = 0; k < n; k++) a->s *= hpu_load_f64(p + k * st, dt);
      }
      break;
    case HPU_REDUCE_AMAX: case HPU_REDUCE_AMIN: {
      int mx = r->kind == HPU_REDUCE_AMAX;
      if (r->imode) {
        for (int64_t k = 0; k < n; k++) {
          int64_t v = hpu_load_i64(p + k * st, dt);
          if (mx ? v > a->i : v < a->i) a->i = v;
        }
      } else if (contig) {
        int nan = 0;
        double v = hpu_nn_run_minmax(dt, p, n, mx, &nan);
        a->nan |= nan;
        if (mx ? v > a->s : v < a->s) a->s = v;
      } else {
        for (int64_t k = 0; k < n; k++) {
          double v = hpu_load_f64(p + k * st, dt);
          if (v != v) a->nan = 1;
          else if (mx ? v > a->s : v < a->s) a->s = v;
        }
      }
      break;
    }
    case HPU_REDUCE_ANY:
      for (int64_t k = 0; k < n && !a->i; k++) a->i = hpu_load_f64(p + k * st, dt) != 0;
      break;
    case HPU_REDUCE_ALL:
      for (int64_t k = 0; k < n && a->i; k++) a->i = hpu_load_f64(p + k * st, dt) != 0;
      break;
    case HPU_REDUCE_NORM: {
      double q = r->p;
      if (q == 2 && contig) { a->s += fast_sum(S_SQ, dt, p, n); break; }
      if (q == 1 && contig) { a->s += fast_sum(S_ABS, dt, p, n); break; }
      for (int64_t k = 0; k < n; k++) {
        double v = fabs(hpu_load_f64(p + k * st, dt));
        if (v != v) a->nan = 1;
        if (q == 2) a->s += v * v;
        else if (q == 1) a->s += v;
        else if (q == INFINITY) a->s = v > a->s ? v : a->s;
        else if (q == -INFINITY) a->s = v < a->s ? v : a->s;
        else if (q == 0) a->s += v != 0;
        else a->s += pow(v, q);
      }
      break;
    }
    default: /* VAR / STD: pass 0 sums, pass 1 squared deviations from a->c */
      if (pass == 0) {
        double s = 0;
        if (contig) s = fast_sum(S_SUM, dt, p, n);
        else for (int64_t k = 0; k < n; k++) s += hpu_load_f64(p + k * st, dt);
        a->s += s;
      } else {
        double s = 0, m = a->c;
        for (int64_t k = 0; k < n; k++) {
          double d = hpu_load_f64(p + k * st, dt) - m;
          s += d * d;
        }
        a->s += s;
      }
      break;
  }
}

/* Feeds the flat range [b, e) of the reduced space of the output whose
 * input elements start at base. */
static void acc_range(const red_t *r, acc_t *a, const char *base, int64_t b, int64_t e, int pass) {
  int64_t n0 = r->rsz[0];
  while (b < e) {
    int64_t inner = b % n0, q = b / n0;
    int64_t off = inner * r->rin[0];
    for (int d = 1; d < r->nr; d++) {
      off += (q % r->rsz[d]) * r->rin[d];
      q /= r->rsz[d];
    }
    int64_t len = n0 - inner < e - b ? n0 - inner : e - b;
    acc_run(r, a, base + off, r->rin[0], len, pass);
    b += len;
  }
}

static void finish(const red_t *r, const acc_t *a, const acc_t *mean, int64_t *out_off) {
  char *o0 = r->out[0] + out_off[0];
  double L = (double)r->L, v;
  switch (r->kind) {
    case HPU_REDUCE_SUM: case HPU_REDUCE_PROD:
      if (r->imode) { hpu_store_i64(o0, r->dto[0], a->i); return; }
      v = a->s;
      break;
    case HPU_REDUCE_MEAN: v = a->s / L; break;
    case HPU_REDUCE_AMAX: case HPU_REDUCE_AMIN:
      if (r->imode) { hpu_store_i64(o0, r->dto[0], a->i); return; }
      v = a->nan ? NAN : a->s;
      break;
    case HPU_REDUCE_ANY: case HPU_REDUCE_ALL: hpu_store_i64(o0, r->dto[0], a->i); return;
    case HPU_REDUCE_NORM:
      v = a->nan ? NAN
          : r->p == 2 ? sqrt(a->s)
          : (r->p == 1 || r->p == 0 || isinf(r->p)) ? a->s
                                                   : pow(a->s, 1.0 / r->p);
      break;
    default: {
      double div = L - r->p;
      if (div < 0) div = 0;
      v = a->s / div;
      if (r->kind == HPU_REDUCE_STD) v = sqrt(v);
      if (r->nout > 1) hpu_store_f64(r->out[1] + out_off[1], r->dto[1], mean->s / L);
      break;
    }
  }
  hpu_store_f64(o0, r->dto[0], v);
}

static int two_pass(const red_t *r) { return r->kind == HPU_REDUCE_VAR || r->kind == HPU_REDUCE_STD; }

/* sum / mean / amax / amin of contiguous rows (the reduced dims form one
 * contiguous run per output): one loop pick per chunk instead of the general
 * walk per row, whose bookkeeping costs as much as summing a row of 1024. */
static int rows_fast(const red_t *r) {
  return (r->kind == HPU_REDUCE_SUM || r->kind == HPU_REDUCE_MEAN || r->kind == HPU_REDUCE_AMAX ||
          r->kind == HPU_REDUCE_AMIN) && !r->imode &&
         hpu_nn_row_dtype(r->dti) && r->nr == 1 && r->rin[0] == (int64_t)hpu_dtype_size(r->dti) &&
         r->nk <= 1;
}

/* One row at a time, so the rows form one sequential stream: summing two
 * rows at once (more loads in flight; faster on an AMX Xeon) read rows of
 * 256-1024 floats at a third to half of torch's bandwidth on a Zen 4 class
 * EPYC, whose prefetcher does not follow two short streams. */
static void reduce_rows_fast(const red_t *r, int64_t begin, int64_t end) {
  int64_t kin = r->nk ? r->kin[0] : 0, kout = r->nk ? r->kout[0][0] : 0;
  int64_t n = r->rsz[0];
  if (r->kind == HPU_REDUCE_AMAX || r->kind == HPU_REDUCE_AMIN) {
    int mx = r->kind == HPU_REDUCE_AMAX;
    hpu_nn_minmax_fn f = hpu_nn_minmax_for(r->dti);
    for (int64_t m = begin; m < end; m++) {
      int nan = 0;
      float v = n ? f(r->in + m * kin, n, mx, &nan) : (mx ? -INFINITY : INFINITY);
      hpu_store_f64(r->out[0] + m * kout, r->dto[0], nan ? NAN : v);
    }
    return;
  }
  sum_fn f = pick_sum(S_SUM, r->dti);
  int mean = r->kind == HPU_REDUCE_MEAN;
  for (int64_t m = begin; m < end; m++) {
    double v = f(r->in + m * kin, n);
    /* mean divides as finish() does (same result as the general path) */
    hpu_store_f64(r->out[0] + m * kout, r->dto[0], mean ? v / (double)r->L : v);
  }
}

/* sum / mean over outer dims with the kept innermost dim contiguous (bias
 * and layer-norm weight gradients: [rows, cols].sum(0)). Per output this is
 * a strided column, and the general walk went element by element: 25-50x
 * slower than torch. Instead each thread takes a block of columns and adds
 * whole rows into its accumulators; every column is summed in the same order
 * whatever the block width, so the result does not depend on the thread
 * count. Planes: the other kept dims, each its own [rows, cols]. */
#define COLS_BLOCK 256 /* double accumulators of a block stay in L1 (2 KB) */
#define COLS_WIDE 1024 /* widest row one call adds whole (4 KB floats, 8 KB doubles) */

typedef struct {
  const red_t *r;
  int64_t cols, rows;          /* columns (kept dim 0), rows (the reduced run) */
  int64_t bw, nblk;            /* columns per block (<= COLS_BLOCK), blocks per plane */
} cols_t;

/* Rows are added in float over blocks of COLS_ROWS rows (16 lanes per
 * instruction, no widening per element), each block's float sums then into
 * the double accumulators: as accurate as torch's float cascade. */
#define COLS_ROWS 32
#define DEF_COLSUM1(NAME, T, LD, ISA)                                                       \
  static HPU_ATTR_##ISA void NAME##_##ISA(const char *in, int64_t rs, int64_t rows, int64_t n, \
                                          double *acc) {                                      \
    float f[COLS_WIDE];                                                                      \
    for (int64_t i0 = 0; i0 < rows; i0 += COLS_ROWS) {                                       \
      int64_t i1 = rows - i0 < COLS_ROWS ? rows : i0 + COLS_ROWS;                            \
      for (int64_t j = 0; j < n; j++) f[j] = 0;                                              \
      for (int64_t i = i0; i < i1; i++) {                                                    \
        const T *p = (const T *)(in + i * rs);                                               \
        for (int64_t j = 0; j < n; j++) f[j] += LD(p[j]);                                    \
      }                                                                                      \
      for (int64_t j = 0; j < n; j++) acc[j] += (double)f[j];                                \
    }                                                                                        \
  }
#define DEF_COLSUM(ISA)                                \
  DEF_COLSUM1(colsum_f32, float, LD_F32, ISA)          \
  DEF_COLSUM1(colsum_bf16, uint16_t, LD_BF16, ISA)

DEF_COLSUM(generic)
#if HPU_HAVE_ISA_CLONES
DEF_COLSUM(avx2)
DEF_COLSUM(avx512)
#endif

typedef void (*colsum_fn)(const char *, int64_t, int64_t, int64_t, double *);

static colsum_fn pick_colsum(hpu_dtype_t dt) {
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  if (dt == HPU_FLOAT32)
    return isa == HPU_ISA_AVX512 ? colsum_f32_avx512 : isa == HPU_ISA_AVX2 ? colsum_f32_avx2 : colsum_f32_generic;
  return isa == HPU_ISA_AVX512 ? colsum_bf16_avx512 : isa == HPU_ISA_AVX2 ? colsum_bf16_avx2 : colsum_bf16_generic;
#else
  return dt == HPU_FLOAT32 ? colsum_f32_generic : colsum_bf16_generic;
#endif
}

static int cols_fast(const red_t *r) {
  int64_t es = (int64_t)hpu_dtype_size(r->dti);
  return (r->kind == HPU_REDUCE_SUM || r->kind == HPU_REDUCE_MEAN) && !r->imode &&
         hpu_nn_row_dtype(r->dti) && r->nk >= 1 && r->ksz[0] >= 16 && r->kin[0] == es && r->kout[0][0] == (int64_t)hpu_dtype_size(r->dto[0]) &&
         r->nr == 1 && r->rsz[0] > 1 && r->rin[0] >= r->ksz[0] * es;
}

static void reduce_cols_blocks(void *ctx, int64_t begin, int64_t end) {
  const cols_t *c = ctx;
  const red_t *r = c->r;
  colsum_fn f = pick_colsum(r->dti);
  int64_t es = (int64_t)hpu_dtype_size(r->dti), eo = (int64_t)hpu_dtype_size(r->dto[0]);
  int mean = r->kind == HPU_REDUCE_MEAN;
  double acc[COLS_BLOCK];
  for (int64_t b = begin; b < end; b++) {
    int64_t plane = b / c->nblk, j0 = b % c->nblk * c->bw;
    int64_t n = c->cols - j0 < c->bw ? c->cols - j0 : c->bw;
    int64_t io, oo[2];
    kept_offsets(r, plane * c->cols, &io, oo);
    for (int64_t j = 0; j < n; j++) acc[j] = 0;
    f(r->in + io + j0 * es, r->rin[0], c->rows, n, acc);
    char *o = r->out[0] + oo[0] + j0 * eo;
    for (int64_t j = 0; j < n; j++) hpu_store_f64(o + j * eo, r->dto[0], mean ? acc[j] / (double)r->L : acc[j]);
  }
}

/* Tall planes of at most COLS_WIDE columns: column blocks would make each
 * thread read a part of every row (1 KB of each 4 KB row of [n, 1024]),
 * a stride the prefetcher follows badly: 18-21 GB/s, as torch. Instead the
 * rows are cut in groups of COLS_GROUP_ROWS (a shape-only cut, so the
 * result does not depend on the thread count), each group adds its whole
 * rows into its own double partials, one sequential stream per thread, and
 * the groups' partials are added in group order. 512 rows a group, so that
 * BERT's bias gradients ([2048, 768], [2048, 1024]) and [1024, 1024] take
 * this path too: with groups of 2048 they went by column blocks, well below
 * torch's speed. */
#define COLS_GROUP_ROWS 512

typedef struct {
  const red_t *r;
  int64_t cols, rows, ngroups;
  double *part; /* ngroups x cols */
} col_groups_t;

/* Group g's column sums into acc (cols doubles). */
static void col_group_sum(const col_groups_t *c, int64_t g, double *acc) {
  int64_t i0 = g * COLS_GROUP_ROWS, n = c->rows - i0 < COLS_GROUP_ROWS ? c->rows - i0 : COLS_GROUP_ROWS;
  for (int64_t j = 0; j < c->cols; j++) acc[j] = 0;
  pick_colsum(c->r->dti)(c->r->in + i0 * c->r->rin[0], c->r->rin[0], n, c->cols, acc);
}

static void reduce_col_groups(void *ctx, int64_t begin, int64_t end) {
  const col_groups_t *c = ctx;
  for (int64_t g = begin; g < end; g++) col_group_sum(c, g, c->part + g * c->cols);
}

static int col_groups_fit(int64_t planes, int64_t cols, int64_t rows) {
  return planes == 1 && cols <= COLS_WIDE && rows >= 2 * COLS_GROUP_ROWS;
}

static void reduce_col_groups_run(const red_t *r, int64_t cols, int64_t rows) {
  col_groups_t c = {r, cols, rows, (rows + COLS_GROUP_ROWS - 1) / COLS_GROUP_ROWS, NULL};
  double total[COLS_WIDE], grp[COLS_WIDE];
  for (int64_t j = 0; j < cols; j++) total[j] = 0;
  c.part = malloc((size_t)(c.ngroups * cols) * sizeof(double));
  if (c.part) hpu_parallel_for(c.ngroups, 1, reduce_col_groups, &c);
  for (int64_t g = 0; g < c.ngroups; g++) {
    const double *p = c.part ? c.part + g * cols : grp;
    if (!c.part) col_group_sum(&c, g, grp); /* out of host memory: in order, here */
    for (int64_t j = 0; j < cols; j++) total[j] += p[j];
  }
  free(c.part);
  int64_t io, oo[2];
  kept_offsets(r, 0, &io, oo);
  int64_t eo = (int64_t)hpu_dtype_size(r->dto[0]);
  int mean = r->kind == HPU_REDUCE_MEAN;
  for (int64_t j = 0; j < cols; j++)
    hpu_store_f64(r->out[0] + oo[0] + j * eo, r->dto[0], mean ? total[j] / (double)r->L : total[j]);
}

static void reduce_cols(const red_t *r) {
  cols_t c;
  c.r = r;
  c.cols = r->ksz[0];
  c.rows = r->rsz[0];
  int64_t planes = r->M / c.cols;
  if (col_groups_fit(planes, c.cols, c.rows)) {
    reduce_col_groups_run(r, c.cols, c.rows);
    return;
  }
  int threads = hpu_get_num_threads();
  /* Narrower blocks when a plane has fewer blocks of COLS_BLOCK than there
   * are threads (256 columns, 2 threads: 128 each, 64-byte multiples);
   * every block still streams whole rows. */
  c.bw = COLS_BLOCK;
  if (planes * ((c.cols + COLS_BLOCK - 1) / COLS_BLOCK) < threads && c.rows * c.cols >= HPU_GRAIN) {
    int64_t w = (c.cols + threads - 1) / threads;
    w = (w + 15) / 16 * 16;
    if (w < c.bw) c.bw = w;
  }
  c.nblk = (c.cols + c.bw - 1) / c.bw;
  int64_t grain = HPU_GRAIN / (c.rows * c.bw);
  hpu_parallel_for(planes * c.nblk, grain > 0 ? grain : 1, reduce_cols_blocks, &c);
}

static void reduce_outputs(void *ctx, int64_t begin, int64_t end) {
  const red_t *r = ctx;
  if (rows_fast(r)) {
    reduce_rows_fast(r, begin, end);
    return;
  }
  for (int64_t m = begin; m < end; m++) {
    int64_t io, oo[2];
    kept_offsets(r, m, &io, oo);
    acc_t a, mean;
    acc_init(r, &a);
    acc_range(r, &a, r->in + io, 0, r->L, 0);
    mean = a;
    if (two_pass(r)) {
      acc_init(r, &a);
      a.c = r->L ? mean.s / (double)r->L : 0;
      acc_range(r, &a, r->in + io, 0, r->L, 1);
    }
    finish(r, &a, &mean, oo);
  }
}

typedef struct {
  const red_t *r;
  const char *base;
  acc_t *parts;
  int pass;
  double c;
} split_t;

static void reduce_blocks(void *ctx, int64_t begin, int64_t end) {
  const split_t *s = ctx;
  for (int64_t b = begin; b < end; b++) {
    acc_t *a = &s->parts[b];
    acc_init(s->r, a);
    a->c = s->c;
    int64_t e = (b + 1) * SPLIT_BLOCK;
    acc_range(s->r, a, s->base, b * SPLIT_BLOCK, e < s->r->L ? e : s->r->L, s->pass);
  }
}

void hpu_nn_reduce(const hpu_node_t *node) {
  red_t r;
  const hpu_tensor_t *outs[2] = {&node->outputs[0], &node->outputs[1]};
  build(&r, &node->inputs[0], outs, node->num_outputs, (uint64_t)node->params.nn.i[1], 1);
  if (r.M == 0) return;
  r.kind = (int)node->params.nn.i[0];
  r.p = hpu_scalar_as_double(node->params.nn.s[0]);
  int k = r.kind;
  r.imode = 0;
  if (k == HPU_REDUCE_SUM || k == HPU_REDUCE_PROD) r.imode = !hpu_dtype_is_floating(r.dto[0]);
  if (k == HPU_REDUCE_AMAX || k == HPU_REDUCE_AMIN) r.imode = !hpu_dtype_is_floating(r.dti);
  if (cols_fast(&r)) {
    reduce_cols(&r);
    return;
  }
  int threads = hpu_get_num_threads();
  if (r.M < threads && r.L >= HPU_REDUCE_SPLIT_MIN_LEN && threads > 1) {
    int64_t nb = (r.L + SPLIT_BLOCK - 1) / SPLIT_BLOCK;
    acc_t *parts = malloc((size_t)nb * sizeof *parts);
    if (parts) {
      for (int64_t m = 0; m < r.M; m++) {
        int64_t io, oo[2];
        kept_offsets(&r, m, &io, oo);
        split_t s = {&r, r.in + io, parts, 0, 0};
        hpu_parallel_for(nb, 1, reduce_blocks, &s);
        acc_t a = parts[0], mean;
        for (int64_t b = 1; b < nb; b++) acc_merge(&r, &a, &parts[b]);
        mean = a;
        if (two_pass(&r)) {
          s.pass = 1;
          s.c = mean.s / (double)r.L;
          hpu_parallel_for(nb, 1, reduce_blocks, &s);
          a = parts[0];
          for (int64_t b = 1; b < nb; b++) acc_merge(&r, &a, &parts[b]);
        }
        finish(&r, &a, &mean, oo);
      }
      free(parts);
      return;
    }
  }
  int64_t grain = r.L > 0 ? HPU_GRAIN / r.L : HPU_GRAIN;
  hpu_parallel_for(r.M, grain > 0 ? grain : 1, reduce_outputs, &r);
}

/* max/min with indices along one dim ----------------------------------------- */

static void argreduce_rows(void *ctx, int64_t begin, int64_t end) {
  const red_t *r = ctx;
  int mx = r->kind == HPU_REDUCE_AMAX;
  int64_t n = r->rsz[0], st = r->rin[0];
  int contig = !r->imode && hpu_nn_row_dtype(r->dti) && st == (int64_t)hpu_dtype_size(r->dti);
  for (int64_t m = begin; m < end; m++) {
    int64_t io, oo[2];
    kept_offsets(r, m, &io, oo);
    const char *p = r->in + io;
    int64_t best = 0;
    if (contig) {
      best = hpu_nn_run_argminmax(r->dti, p, n, mx);
    } else if (r->imode) {
      int64_t bv = hpu_load_i64(p, r->dti);
      for (int64_t k = 1; k < n; k++) {
        int64_t v = hpu_load_i64(p + k * st, r->dti);
        if (mx ? v > bv : v < bv) { bv = v; best = k; }
      }
    } else {
      double bv = hpu_load_f64(p, r->dti);
      for (int64_t k = 1; k < n && bv == bv; k++) {
        double v = hpu_load_f64(p + k * st, r->dti);
        if (v != v || (mx ? v > bv : v < bv)) { bv = v; best = k; }
      }
    }
    if (r->nout == 2) {
      /* the value is copied bit for bit */
      const char *src = p + best * st;
      char *dst = r->out[0] + oo[0];
      memcpy(dst, src, hpu_dtype_size(r->dti));
      *(int64_t *)(r->out[1] + oo[1]) = best;
    } else {
      *(int64_t *)(r->out[0] + oo[0]) = best;
    }
  }
}

void hpu_nn_argreduce(const hpu_node_t *node) {
  red_t r;
  const hpu_tensor_t *outs[2] = {&node->outputs[0], &node->outputs[1]};
  build(&r, &node->inputs[0], outs, node->num_outputs, (uint64_t)1 << node->params.nn.i[1], 0);
  if (r.M == 0 || r.L == 0) return;
  r.kind = (int)node->params.nn.i[0];
  r.imode = !hpu_dtype_is_floating(r.dti);
  int64_t grain = HPU_GRAIN / r.L;
  hpu_parallel_for(r.M, grain > 0 ? grain : 1, argreduce_rows, &r);
}

/* cumsum ----------------------------------------------------------------------- */

/* float32 rows with unit strides, four at a time: each running sum is a
 * chain of dependent double adds (PyTorch's CPU cumsum accumulates floats in
 * double too, so the bits are its), and one row alone waits on the add's
 * latency at every element; four rows' chains overlap. Returns the first
 * row it did not take. */
static int64_t cumsum_rows4_f32(const red_t *r, int64_t begin, int64_t end) {
  int64_t n = r->rsz[0];
  int64_t m = begin;
  for (; m + 4 <= end; m += 4) {
    const float *p[4];
    float *o[4];
    for (int j = 0; j < 4; j++) {
      int64_t io, oo[2];
      kept_offsets(r, m + j, &io, oo);
      p[j] = (const float *)(r->in + io);
      o[j] = (float *)(r->out[0] + oo[0]);
    }
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t k = 0; k < n; k++) {
      s0 += p[0][k];
      s1 += p[1][k];
      s2 += p[2][k];
      s3 += p[3][k];
      o[0][k] = (float)s0;
      o[1][k] = (float)s1;
      o[2][k] = (float)s2;
      o[3][k] = (float)s3;
    }
  }
  return m;
}

/* A running product in PyTorch's CPU accumulation type (at::acc_type):
 * float for bf16 / fp16, double for float32 / float64, int64 for integers. */
static void cumprod_row(const red_t *r, const char *p, char *o, int64_t n, int64_t si, int64_t so) {
  hpu_dtype_t dt = r->dto[0];
  if (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16) {
    float s = 1;
    for (int64_t k = 0; k < n; k++) {
      s *= hpu_load_f32(p + k * si, r->dti);
      hpu_store_f32(o + k * so, dt, s);
    }
  } else if (hpu_dtype_is_floating(dt)) {
    double s = 1;
    for (int64_t k = 0; k < n; k++) {
      s *= hpu_load_f64(p + k * si, r->dti);
      hpu_store_f64(o + k * so, dt, s);
    }
  } else {
    uint64_t s = 1; /* wraps as int64 does on the CPU */
    for (int64_t k = 0; k < n; k++) {
      s *= (uint64_t)hpu_load_i64(p + k * si, r->dti);
      hpu_store_i64(o + k * so, dt, (int64_t)s);
    }
  }
}

/* log(e^x + e^y) as PyTorch's CPU logcumsumexp takes it (x the new element,
 * y the running value): log1p(e^(min - max)) + max, NaN propagating, and x
 * itself when both are the same infinity (e^(inf - inf) would be NaN). */
#define LOG_ADD_EXP(T, EXP, LOG1P, x, y)                                      \
  ({                                                                         \
    T x_ = (x), y_ = (y);                                                    \
    T lo_ = y_ != y_ ? y_ : (y_ < x_ ? y_ : x_);                             \
    T hi_ = y_ != y_ ? y_ : (x_ < y_ ? y_ : x_);                             \
    (lo_ != hi_ || isfinite(lo_)) ? LOG1P(EXP(lo_ - hi_)) + hi_ : x_;        \
  })

/* The running value in PyTorch's CPU accumulation type: float for bf16 /
 * fp16, double for float32 / float64, with the matching libm calls. */
static void logcumsumexp_row(const red_t *r, const char *p, char *o, int64_t n, int64_t si,
                             int64_t so) {
  hpu_dtype_t dt = r->dto[0];
  if (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16) {
    float s = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
      s = LOG_ADD_EXP(float, expf, log1pf, hpu_load_f32(p + k * si, r->dti), s);
      hpu_store_f32(o + k * so, dt, s);
    }
  } else {
    double s = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
      s = LOG_ADD_EXP(double, exp, log1p, hpu_load_f64(p + k * si, r->dti), s);
      hpu_store_f64(o + k * so, dt, s);
    }
  }
}

static void logcumsumexp_rows(void *ctx, int64_t begin, int64_t end) {
  const red_t *r = ctx;
  for (int64_t m = begin; m < end; m++) {
    int64_t io, oo[2];
    kept_offsets(r, m, &io, oo);
    logcumsumexp_row(r, r->in + io, r->out[0] + oo[0], r->rsz[0], r->rin[0], r->rout[0]);
  }
}

static void cumsum_rows(void *ctx, int64_t begin, int64_t end) {
  const red_t *r = ctx;
  int64_t n = r->rsz[0], si = r->rin[0], so = r->rout[0];
  int fl = hpu_dtype_is_floating(r->dto[0]);
  if (r->kind == HPU_REDUCE_PROD) {
    for (int64_t m = begin; m < end; m++) {
      int64_t io, oo[2];
      kept_offsets(r, m, &io, oo);
      cumprod_row(r, r->in + io, r->out[0] + oo[0], n, si, so);
    }
    return;
  }
  if (r->dti == HPU_FLOAT32 && r->dto[0] == HPU_FLOAT32 && si == 4 && so == 4)
    begin = cumsum_rows4_f32(r, begin, end);
  for (int64_t m = begin; m < end; m++) {
    int64_t io, oo[2];
    kept_offsets(r, m, &io, oo);
    const char *p = r->in + io;
    char *o = r->out[0] + oo[0];
    if (fl) {
      double s = 0;
      for (int64_t k = 0; k < n; k++) {
        s += hpu_load_f64(p + k * si, r->dti);
        hpu_store_f64(o + k * so, r->dto[0], s);
      }
    } else {
      uint64_t s = 0;
      for (int64_t k = 0; k < n; k++) {
        s += (uint64_t)hpu_load_i64(p + k * si, r->dti);
        hpu_store_i64(o + k * so, r->dto[0], (int64_t)s);
      }
    }
  }
}

void hpu_nn_cumsum(const hpu_node_t *node) {
  red_t r;
  const hpu_tensor_t *outs[1] = {&node->outputs[0]};
  build(&r, &node->inputs[0], outs, 1, (uint64_t)1 << node->params.nn.i[0], 0);
  r.kind = node->params.nn.i[1] == 1 ? HPU_REDUCE_PROD : HPU_REDUCE_SUM;
  if (r.M == 0 || r.L == 0) return;
  if (node->params.nn.i[1] == 2) { /* an exp and a log1p per element */
    int64_t grain = 4096 / r.L;
    hpu_parallel_for(r.M, grain > 0 ? grain : 1, logcumsumexp_rows, &r);
    return;
  }
  int64_t grain = HPU_GRAIN / r.L;
  hpu_parallel_for(r.M, grain > 0 ? grain : 1, cumsum_rows, &r);
}
