/* The pointwise tail (hpu/ops_tailpw.def): elementwise ops that are rare in
 * training loops (copysign, fmax, gcd, shifts, nextafter, frexp, ...) and
 * the transforms of uniform draws into other distributions.
 *
 * They do not need pointwise.c's vectorised engine, so they get a plain
 * one: the iterator (iter.h) hands runs of elements with per-operand
 * strides; each run is cut into chunks, the operands are converted into
 * chunk buffers of the math family's type (float for float32 / bf16 /
 * fp16, double for float64, int64 for bool and integers), the op's loop
 * runs over the chunk and the result is rounded to the compute dtype, then
 * cast to the output's dtype, as TensorIterator does. Integer results are
 * exact in the compute dtype's width (narrowed where PyTorch's arithmetic
 * wraps), so gcd, lcm and the shifts match the CPU bit for bit. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT
#define CHUNK 256

enum { FAM_F, FAM_D, FAM_I };

typedef struct {
  hpu_op_t op;
  int fam, arity, nout;
  hpu_dtype_t cdt, dto, dto1;
  hpu_dtype_t dt[2]; /* dtype of tensor operand k */
  int src[2];        /* iterator operand of math operand k, or -1: scalar */
  float sF[2];
  double sD[2];
  int64_t sI[2];
  int64_t dist;      /* DIST_TRANSFORM: i[0] */
  double p0, p1;     /* s[0], s[1] */
  int neg_decimals;  /* ROUND_DECIMALS: decimals < 0 */
  float tenF;        /* 10^|decimals| in the math family's type */
  double tenD;
  int width, is_signed; /* integer compute dtype */
} tp_ctx_t;

static int arity_of(hpu_op_t op) {
  switch (op) {
    case HPU_OP_FRAC: case HPU_OP_ANGLE: case HPU_OP_ROUND_DECIMALS: case HPU_OP_SIGNBIT:
    case HPU_OP_FREXP: case HPU_OP_DIST_TRANSFORM:
      return 1;
    default: return 2;
  }
}

static int fam_of(hpu_dtype_t c) {
  if (c == HPU_FLOAT64) return FAM_D;
  return hpu_dtype_is_floating(c) ? FAM_F : FAM_I;
}

/* Which compute dtypes an op takes: 'f' floating only, 'i' integers (no
 * bool), 'a' any. */
static char kind_of(hpu_op_t op) {
  switch (op) {
    case HPU_OP_SIGNBIT: case HPU_OP_FMAX: case HPU_OP_FMIN: case HPU_OP_HEAVISIDE: return 'a';
    case HPU_OP_GCD: case HPU_OP_LCM: case HPU_OP_SHIFT_LEFT: case HPU_OP_SHIFT_RIGHT: return 'i';
    default: return 'f';
  }
}

/* Integer math in the compute dtype's width ------------------------------- */

static int64_t iabs_w(int64_t v, hpu_dtype_t c) { /* std::abs, wrapping at the width */
  return hpu_narrow_int(v < 0 ? (int64_t)(0 - (uint64_t)v) : v, c);
}

/* PyTorch's calc_gcd on values of dtype c: Euclid on |a|, |b| (|INT_MIN| stays
 * INT_MIN, as in two's complement). */
static int64_t tp_gcd(int64_t a, int64_t b, hpu_dtype_t c) {
  a = iabs_w(a, c);
  b = iabs_w(b, c);
  while (a != 0) {
    int64_t t = a;
    a = a == -1 ? 0 : hpu_narrow_int(b % a, c);
    b = t;
  }
  return b;
}

/* PyTorch's lcm: g == 0 ? 0 : abs(a / g * b). Types narrower than int are
 * promoted to int by C++ before the product (exact here), int32 and int64
 * wrap in their width. */
static int64_t tp_lcm(int64_t a, int64_t b, hpu_dtype_t c) {
  int64_t g = tp_gcd(a, b, c);
  if (g == 0) return 0;
  int64_t q = (g == -1) ? (int64_t)(0 - (uint64_t)a) : a / g;
  int64_t p = (int64_t)((uint64_t)q * (uint64_t)b);
  if (c == HPU_INT32 || c == HPU_INT64) p = hpu_narrow_int(p, c);
  return hpu_narrow_int(iabs_w(p, HPU_INT64), c);
}

static int64_t tp_shl(int64_t a, int64_t b, const tp_ctx_t *x) {
  /* b read as the signed type of the width: negative or >= width gives 0 */
  int64_t sb = x->width == 8 ? (int8_t)b : b;
  if (sb < 0 || sb >= x->width) return 0;
  return (int64_t)((uint64_t)a << sb);
}

static int64_t tp_shr(int64_t a, int64_t b, const tp_ctx_t *x) {
  int64_t sb = x->width == 8 ? (int8_t)b : b;
  int max_shift = x->width - x->is_signed;
  if (sb < 0 || sb >= max_shift) sb = max_shift;
  if (!x->is_signed) return sb >= x->width ? 0 : (int64_t)((uint64_t)a >> sb);
  return a >> sb; /* arithmetic on the sign-extended value */
}

/* nextafter on a 16-bit float's bits, as c10's (musl's algorithm). */
static float next16(float from, float to, hpu_dtype_t c) {
  if (from != from || to != to) return from + to;
  uint16_t uf = c == HPU_BFLOAT16 ? hpu_cvt_f32_bf16(from) : hpu_cvt_f32_half(from);
  uint16_t ut = c == HPU_BFLOAT16 ? hpu_cvt_f32_bf16(to) : hpu_cvt_f32_half(to);
  const uint16_t sign = 0x8000;
  if (uf == ut) return from;
  uint16_t af = uf & (uint16_t)~sign, at = ut & (uint16_t)~sign;
  if (af == 0) {
    if (at == 0) return to;
    uf = (uint16_t)((ut & sign) | 1);
  } else if (af > at || ((uf ^ ut) & sign)) {
    uf--;
  } else {
    uf++;
  }
  return c == HPU_BFLOAT16 ? hpu_cvt_bf16_f32(uf) : hpu_cvt_half_f32(uf);
}

/* Float math ---------------------------------------------------------------- */

#define INV_LN2F 1.4426950408889634f
#define INV_LN2 1.4426950408889634

static float logaddexpf_(float a, float b) {
  if (isinf(a) && a == b) return a;
  float m = (a != a || b != b) ? a + b : a > b ? a : b;
  return m + log1pf(expf(-fabsf(a - b)));
}
static double logaddexp_(double a, double b) {
  if (isinf(a) && a == b) return a;
  double m = (a != a || b != b) ? a + b : a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}
static float logaddexp2f_(float a, float b) {
  if (isinf(a) && a == b) return a;
  float m = (a != a || b != b) ? a + b : a > b ? a : b;
  return fmaf(log1pf(exp2f(-fabsf(a - b))), INV_LN2F, m); /* PyTorch's vector loop: fmadd */
}
static double logaddexp2_(double a, double b) {
  if (isinf(a) && a == b) return a;
  double m = (a != a || b != b) ? a + b : a > b ? a : b;
  return m + log1p(exp2(-fabs(a - b))) * INV_LN2; /* float64: no fmadd on the CPU */
}

static void run_F(const tp_ctx_t *x, int64_t n, float *o, int32_t *e, const float *a, const float *b) {
  const hpu_dtype_t c = x->cdt;
  const int is16 = c == HPU_BFLOAT16 || c == HPU_FLOAT16;
  switch (x->op) {
    case HPU_OP_FRAC: for (int64_t i = 0; i < n; i++) o[i] = a[i] - truncf(a[i]); break;
    case HPU_OP_ANGLE:
      for (int64_t i = 0; i < n; i++) o[i] = a[i] != a[i] ? a[i] : a[i] < 0 ? (float)M_PI : 0.0f;
      break;
    case HPU_OP_ROUND_DECIMALS:
      for (int64_t i = 0; i < n; i++)
        o[i] = x->neg_decimals ? nearbyintf(a[i] / x->tenF) * x->tenF : nearbyintf(a[i] * x->tenF) / x->tenF;
      break;
    case HPU_OP_SIGNBIT: for (int64_t i = 0; i < n; i++) o[i] = signbit(a[i]) ? 1.0f : 0.0f; break;
    case HPU_OP_FREXP:
      for (int64_t i = 0; i < n; i++) {
        int ex = 0;
        o[i] = frexpf(a[i], &ex);
        e[i] = ex;
      }
      break;
    case HPU_OP_COPYSIGN: for (int64_t i = 0; i < n; i++) o[i] = copysignf(a[i], b[i]); break;
    case HPU_OP_HYPOT: for (int64_t i = 0; i < n; i++) o[i] = hypotf(a[i], b[i]); break;
    case HPU_OP_LOGADDEXP: for (int64_t i = 0; i < n; i++) o[i] = logaddexpf_(a[i], b[i]); break;
    case HPU_OP_LOGADDEXP2: for (int64_t i = 0; i < n; i++) o[i] = logaddexp2f_(a[i], b[i]); break;
    case HPU_OP_NEXTAFTER:
      for (int64_t i = 0; i < n; i++) o[i] = is16 ? next16(a[i], b[i], c) : nextafterf(a[i], b[i]);
      break;
    /* A NaN loses; on ties (0 and -0) PyTorch's CPU keeps x, but y for bf16 */
    case HPU_OP_FMAX:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i] != a[i] ? b[i] : b[i] != b[i] ? a[i]
               : c == HPU_BFLOAT16 ? (a[i] > b[i] ? a[i] : b[i]) : (a[i] >= b[i] ? a[i] : b[i]);
      break;
    case HPU_OP_FMIN:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i] != a[i] ? b[i] : b[i] != b[i] ? a[i]
               : c == HPU_BFLOAT16 ? (a[i] < b[i] ? a[i] : b[i]) : (a[i] <= b[i] ? a[i] : b[i]);
      break;
    case HPU_OP_HEAVISIDE:
      for (int64_t i = 0; i < n; i++) o[i] = a[i] == 0 ? b[i] : (float)(a[i] > 0);
      break;
    default: break;
  }
}

static double dist_of(const tp_ctx_t *x, double u) {
  switch (x->dist) {
    case 0: return -log1p(-u) / x->p0;
    case 1: return x->p0 + x->p1 * tan(M_PI * (u - 0.5));
    case 2: {
      double k = ceil(log1p(-u) / log1p(-x->p0));
      return k < 1 ? 1 : k;
    }
    default: return exp(u);
  }
}

static void run_D(const tp_ctx_t *x, int64_t n, double *o, int32_t *e, const double *a, const double *b) {
  switch (x->op) {
    case HPU_OP_FRAC: for (int64_t i = 0; i < n; i++) o[i] = a[i] - trunc(a[i]); break;
    case HPU_OP_ANGLE:
      for (int64_t i = 0; i < n; i++) o[i] = a[i] != a[i] ? a[i] : a[i] < 0 ? M_PI : 0.0;
      break;
    case HPU_OP_ROUND_DECIMALS:
      for (int64_t i = 0; i < n; i++)
        o[i] = x->neg_decimals ? nearbyint(a[i] / x->tenD) * x->tenD : nearbyint(a[i] * x->tenD) / x->tenD;
      break;
    case HPU_OP_SIGNBIT: for (int64_t i = 0; i < n; i++) o[i] = signbit(a[i]) ? 1.0 : 0.0; break;
    case HPU_OP_FREXP:
      for (int64_t i = 0; i < n; i++) {
        int ex = 0;
        o[i] = frexp(a[i], &ex);
        e[i] = ex;
      }
      break;
    case HPU_OP_COPYSIGN: for (int64_t i = 0; i < n; i++) o[i] = copysign(a[i], b[i]); break;
    case HPU_OP_HYPOT: for (int64_t i = 0; i < n; i++) o[i] = hypot(a[i], b[i]); break;
    case HPU_OP_LOGADDEXP: for (int64_t i = 0; i < n; i++) o[i] = logaddexp_(a[i], b[i]); break;
    case HPU_OP_LOGADDEXP2: for (int64_t i = 0; i < n; i++) o[i] = logaddexp2_(a[i], b[i]); break;
    case HPU_OP_NEXTAFTER: for (int64_t i = 0; i < n; i++) o[i] = nextafter(a[i], b[i]); break;
    case HPU_OP_FMAX:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i] != a[i] ? b[i] : b[i] != b[i] ? a[i] : a[i] >= b[i] ? a[i] : b[i];
      break;
    case HPU_OP_FMIN:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i] != a[i] ? b[i] : b[i] != b[i] ? a[i] : a[i] <= b[i] ? a[i] : b[i];
      break;
    case HPU_OP_HEAVISIDE:
      for (int64_t i = 0; i < n; i++) o[i] = a[i] == 0 ? b[i] : (double)(a[i] > 0);
      break;
    case HPU_OP_DIST_TRANSFORM: for (int64_t i = 0; i < n; i++) o[i] = dist_of(x, a[i]); break;
    default: break;
  }
}

static void run_I(const tp_ctx_t *x, int64_t n, int64_t *o, const int64_t *a, const int64_t *b) {
  const hpu_dtype_t c = x->cdt;
  switch (x->op) {
    case HPU_OP_SIGNBIT: for (int64_t i = 0; i < n; i++) o[i] = a[i] < 0; break;
    case HPU_OP_FMAX: for (int64_t i = 0; i < n; i++) o[i] = a[i] > b[i] ? a[i] : b[i]; break;
    case HPU_OP_FMIN: for (int64_t i = 0; i < n; i++) o[i] = a[i] < b[i] ? a[i] : b[i]; break;
    case HPU_OP_HEAVISIDE: for (int64_t i = 0; i < n; i++) o[i] = a[i] == 0 ? b[i] : a[i] > 0; break;
    case HPU_OP_GCD: for (int64_t i = 0; i < n; i++) o[i] = tp_gcd(a[i], b[i], c); break;
    case HPU_OP_LCM: for (int64_t i = 0; i < n; i++) o[i] = tp_lcm(a[i], b[i], c); break;
    case HPU_OP_SHIFT_LEFT: for (int64_t i = 0; i < n; i++) o[i] = tp_shl(a[i], b[i], x); break;
    case HPU_OP_SHIFT_RIGHT: for (int64_t i = 0; i < n; i++) o[i] = tp_shr(a[i], b[i], x); break;
    default: break;
  }
}

/* The loop ------------------------------------------------------------------- */

static void tp_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  const tp_ctx_t *x = vctx;
  (void)index;
  union { float f[CHUNK]; double d[CHUNK]; int64_t i[CHUNK]; } in[2], out;
  int32_t ex[CHUNK];
  const int in0 = x->nout; /* iterator operands: outputs first, then inputs */
  for (int64_t done = 0; done < n; done += CHUNK) {
    int64_t m = n - done < CHUNK ? n - done : CHUNK;
    for (int k = 0; k < x->arity; k++) {
      int s = x->src[k];
      for (int64_t i = 0; i < m; i++) {
        const char *p = s < 0 ? NULL : data[in0 + s] + (done + i) * st[in0 + s];
        switch (x->fam) {
          case FAM_F: /* rounded to the compute dtype only when it differs (a NaN keeps its sign) */
            in[k].f[i] = !p ? x->sF[k]
                         : x->dt[k] == x->cdt ? hpu_load_f32(p, x->dt[k])
                                              : hpu_round_to(hpu_load_f32(p, x->dt[k]), x->cdt);
            break;
          case FAM_D: in[k].d[i] = p ? hpu_load_f64(p, x->dt[k]) : x->sD[k]; break;
          default: in[k].i[i] = p ? hpu_narrow_int(hpu_load_i64(p, x->dt[k]), x->cdt) : x->sI[k]; break;
        }
      }
    }
    switch (x->fam) {
      case FAM_F:
        run_F(x, m, out.f, ex, in[0].f, in[1].f);
        for (int64_t i = 0; i < m; i++)
          hpu_store_f32(data[0] + (done + i) * st[0], x->dto,
                        x->dto == x->cdt ? out.f[i] : hpu_round_to(out.f[i], x->cdt));
        break;
      case FAM_D:
        run_D(x, m, out.d, ex, in[0].d, in[1].d);
        for (int64_t i = 0; i < m; i++) hpu_store_f64(data[0] + (done + i) * st[0], x->dto, out.d[i]);
        break;
      default:
        run_I(x, m, out.i, in[0].i, in[1].i);
        for (int64_t i = 0; i < m; i++)
          hpu_store_i64(data[0] + (done + i) * st[0], x->dto, hpu_narrow_int(out.i[i], x->cdt));
        break;
    }
    if (x->nout == 2)
      for (int64_t i = 0; i < m; i++) *(int32_t *)(data[1] + (done + i) * st[1]) = ex[i];
  }
}

/* Validation ----------------------------------------------------------------- */

hpu_status_t hpu_validate_tailpw(const hpu_node_t *node) {
  const char *name = hpu_op_name(node->op);
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  int arity = arity_of(node->op), nout = node->op == HPU_OP_FREXP ? 2 : 1;
  uint32_t all = (1u << arity) - 1u, mask = p->scalar_operands;
  if (mask & ~all)
    return hpu_error(INVALID, "%s: scalar operand mask 0x%x names operands beyond the op's %d", name,
                     (unsigned)mask, arity);
  int nscal = (int)(mask & 1) + (int)((mask >> 1) & 1);
  if (node->num_inputs != arity - nscal)
    return hpu_error(INVALID, "%s: expects %d tensor input(s) (%d operand(s), %d given as scalars), got %d",
                     name, arity - nscal, arity, nscal, node->num_inputs);
  if (node->num_outputs != nout)
    return hpu_error(INVALID, "%s: expects %d output(s), got %d", name, nout, node->num_outputs);
  hpu_dtype_t c = node->compute_dtype;
  if (!hpu_dtype_is_valid(c)) return hpu_error(INVALID, "%s: invalid compute dtype %d", name, (int)c);
  char kind = kind_of(node->op);
  if ((kind == 'f' && !hpu_dtype_is_floating(c)) ||
      (kind == 'i' && (hpu_dtype_is_floating(c) || c == HPU_BOOL)))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: not implemented for compute dtype %s", name,
                     hpu_dtype_name(c));
  for (int k = 0; k < arity; k++)
    if ((mask >> k) & 1) HPU_TRY(hpu_check_scalar(name, "a scalar operand", p->operand[k]));
  for (int k = 0; k < 2; k++) HPU_TRY(hpu_check_scalar(name, "a parameter", p->s[k]));
  if (node->op == HPU_OP_DIST_TRANSFORM) {
    if (c != HPU_FLOAT64 || node->num_inputs != 1 || node->inputs[0].dtype != HPU_FLOAT64)
      return hpu_error(INVALID, "%s: expects a float64 input and compute dtype", name);
    if (p->i[0] < 0 || p->i[0] > 3)
      return hpu_error(INVALID, "%s: unknown distribution %lld", name, (long long)p->i[0]);
  }
  if (node->op == HPU_OP_FREXP) {
    if (node->outputs[1].dtype != HPU_INT32)
      return hpu_error(INVALID, "%s: the exponent output must be int32, got %s", name,
                       hpu_dtype_name(node->outputs[1].dtype));
    const hpu_tensor_t *a = &node->outputs[0], *b = &node->outputs[1];
    int same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->sizes[d] == b->sizes[d];
    if (!same) return hpu_error(INVALID, "%s: mantissa and exponent outputs differ in shape", name);
  }
  for (int k = 0; k < nout; k++) {
    const hpu_tensor_t *out = &node->outputs[k];
    HPU_TRY(hpu_check_tensor(name, "output", k, out));
    HPU_TRY(hpu_check_output(name, out));
    for (int i = 0; i < node->num_inputs; i++) {
      HPU_TRY(hpu_check_tensor(name, "input", i, &node->inputs[i]));
      HPU_TRY(hpu_check_broadcast(name, i, &node->inputs[i], out));
      HPU_TRY(hpu_check_overlap(name, out, i, &node->inputs[i], 1));
    }
  }
  if (nout == 2) HPU_TRY(hpu_check_overlap(name, &node->outputs[0], 2, &node->outputs[1], 0));
  return HPU_SUCCESS;
}

/* Execution ------------------------------------------------------------------ */

hpu_status_t hpu_execute_tailpw(const hpu_node_t *node) {
  if (hpu_tensor_numel(&node->outputs[0]) == 0) return HPU_SUCCESS;
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  tp_ctx_t x;
  memset(&x, 0, sizeof x);
  x.op = node->op;
  x.arity = arity_of(node->op);
  x.nout = node->num_outputs;
  x.cdt = node->compute_dtype;
  x.fam = fam_of(x.cdt);
  x.dto = node->outputs[0].dtype;
  x.dist = p->i[0];
  x.p0 = hpu_scalar_as_double(p->s[0]);
  x.p1 = hpu_scalar_as_double(p->s[1]);
  if (node->op == HPU_OP_ROUND_DECIMALS) {
    /* PyTorch: static_cast<opmath_t>(std::pow(10, |decimals|)) */
    double d = (double)p->i[0];
    x.neg_decimals = d < 0;
    x.tenD = pow(10.0, fabs(d));
    x.tenF = (float)x.tenD;
  }
  x.width = 8 * (int)hpu_dtype_size(x.cdt);
  x.is_signed = x.cdt != HPU_UINT8 && x.cdt != HPU_BOOL;
  const hpu_tensor_t *ins[2] = {NULL, NULL};
  int next = 0;
  for (int k = 0; k < x.arity; k++) {
    if ((p->scalar_operands >> k) & 1) {
      hpu_scalar_t s = p->operand[k];
      double d = hpu_scalar_as_double(s);
      x.sF[k] = hpu_round_to((float)d, x.cdt);
      x.sD[k] = d;
      x.sI[k] = hpu_narrow_int(s.kind == HPU_SCALAR_FLOAT ? hpu_f2i(s.f) : s.i, x.cdt);
      x.src[k] = -1;
    } else {
      ins[next] = &node->inputs[next];
      x.dt[k] = ins[next]->dtype;
      x.src[k] = next++;
    }
  }
  hpu_iter_t it;
  if (x.nout == 1) {
    hpu_iter_build(&it, &node->outputs[0], ins, next, 0);
  } else {
    /* FREXP: the exponent output rides as iterator operand 1 (an "input"
     * of the mantissa's shape), the math input follows. */
    const hpu_tensor_t *ops[2] = {&node->outputs[1], ins[0]};
    hpu_iter_build(&it, &node->outputs[0], ops, 2, 0);
  }
  hpu_iter_for_each(&it, tp_loop, &x, HPU_GRAIN);
  return HPU_SUCCESS;
}
