/* The loops of batch norm over one channel (batch_norm.c), included there
 * with T (float / double), ATTR (an ISA attribute of isa.h) and RN(x) (the
 * name's suffix). A channel is `runs` runs of hw elements, `stride`
 * elements apart; the loops take them all, so a small image (4x4: runs of
 * 16) costs one call per channel, not one per run. Sums go into BN_LANES
 * double lanes (lane l takes each run's elements l, l + 16, ...; a
 * run's last hw % 16 elements of the squared deviations go into one more
 * sum), vectors of GCC's vector extension, folded once per channel in one
 * fixed order: every ISA gives the same bits. (Written as arrays of 16
 * scalars, the two-sum loop stayed scalar.) The
 * per-element arithmetic is in T and, as batch_norm.c is built without
 * FMA contraction, rounds as the CPU's kernel does. */

/* The lanes as BN_NV native vectors of BN_VW doubles (a zmm, ymm or xmm
 * each: a wider vector type is kept in memory and every step goes through
 * it), and BN_VW elements of T to be widened into one. */
#define BN_NV (BN_LANES / BN_VW)
typedef double RN(vd_t) __attribute__((vector_size(BN_VW * sizeof(double))));
typedef T RN(vt_t) __attribute__((vector_size(BN_VW * sizeof(T))));

static ATTR inline RN(vd_t) RN(bn_ld)(const T *p) {
  RN(vt_t) v;
  memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, RN(vd_t));
}

static ATTR inline double RN(bn_fold_v)(const RN(vd_t) *a) {
  double l[BN_LANES];
  memcpy(l, a, sizeof l);
  return bn_fold(l);
}

/* sum(x) */
static ATTR double RN(bn_sum)(const T *x, int64_t runs, int64_t hw, int64_t stride) {
  RN(vd_t) a[BN_NV] = {{0}};
  for (int64_t r = 0; r < runs; r++) {
    const T *p = x + r * stride;
    int64_t j = 0;
    for (; j + BN_LANES <= hw; j += BN_LANES)
      for (int v = 0; v < BN_NV; v++) a[v] += RN(bn_ld)(p + j + v * BN_VW);
    for (int l = 0; j < hw; j++, l++) a[l / BN_VW][l % BN_VW] += (double)p[j]; /* as in bn_sumdot */
  }
  return RN(bn_fold_v)(a);
}

/* sum((x - m)^2) */
static ATTR double RN(bn_ssd)(const T *x, int64_t runs, int64_t hw, int64_t stride, double m) {
  RN(vd_t) a[BN_NV] = {{0}};
  double tail = 0;
  for (int64_t r = 0; r < runs; r++) {
    const T *p = x + r * stride;
    int64_t j = 0;
    for (; j + BN_LANES <= hw; j += BN_LANES)
      for (int v = 0; v < BN_NV; v++) {
        RN(vd_t) d = RN(bn_ld)(p + j + v * BN_VW) - m;
        a[v] += d * d;
      }
    for (; j < hw; j++) tail += ((double)p[j] - m) * ((double)p[j] - m);
  }
  return RN(bn_fold_v)(a) + tail;
}

/* *sum = sum(g), *dot = sum(g * (x - mean)) */
static ATTR void RN(bn_sumdot)(const T *g, const T *x, int64_t runs, int64_t hw, int64_t stride, double mean,
                               double *sum, double *dot) {
  RN(vd_t) s[BN_NV] = {{0}}, d[BN_NV] = {{0}};
  for (int64_t r = 0; r < runs; r++) {
    const T *gp = g + r * stride, *xp = x + r * stride;
    int64_t j = 0;
    for (; j + BN_LANES <= hw; j += BN_LANES)
      for (int v = 0; v < BN_NV; v++) {
        RN(vd_t) gv = RN(bn_ld)(gp + j + v * BN_VW);
        s[v] += gv;
        d[v] += gv * (RN(bn_ld)(xp + j + v * BN_VW) - mean);
      }
    /* the last elements into the first lanes, one by one (copying them
     * into a zero-padded block cost more than the vectors when runs are
     * short: 49 elements at 7x7) */
    for (int l = 0; j < hw; j++, l++) {
      double gv = (double)gp[j];
      s[l / BN_VW][l % BN_VW] += gv;
      d[l / BN_VW][l % BN_VW] += gv * ((double)xp[j] - mean);
    }
  }
  *sum = RN(bn_fold_v)(s);
  *dot = RN(bn_fold_v)(d);
}

/* y = x * a + b */
static ATTR void RN(bn_affine)(const T *x, T *y, int64_t runs, int64_t hw, int64_t stride, T a, T b) {
  for (int64_t r = 0; r < runs; r++) {
    const T *p = x + r * stride;
    T *q = y + r * stride;
    for (int64_t j = 0; j < hw; j++) q[j] = p[j] * a + b;
  }
}

/* training dx = (g - mdy - (x - mean) * k) * ws */
static ATTR void RN(bn_dx)(const T *g, const T *x, T *dx, int64_t runs, int64_t hw, int64_t stride, T mean, T mdy,
                           T k, T ws) {
  for (int64_t r = 0; r < runs; r++) {
    const T *gp = g + r * stride, *xp = x + r * stride;
    T *q = dx + r * stride;
    for (int64_t j = 0; j < hw; j++) q[j] = (gp[j] - mdy - (xp[j] - mean) * k) * ws;
  }
}

/* eval dx = g * ws */
static ATTR void RN(bn_scale)(const T *g, T *dx, int64_t runs, int64_t hw, int64_t stride, T ws) {
  for (int64_t r = 0; r < runs; r++) {
    const T *gp = g + r * stride;
    T *q = dx + r * stride;
    for (int64_t j = 0; j < hw; j++) q[j] = gp[j] * ws;
  }
}

#undef BN_NV
