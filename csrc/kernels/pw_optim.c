/* Fused optimizer steps: one pass over each parameter tensor updating the
 * parameter and its state in place, with the arithmetic of PyTorch's fused
 * CPU kernels (FusedAdamKernel.cpp / FusedSGDKernel.cpp, vectorised path):
 * float32, bfloat16 and float16 state are updated in float (reduced types
 * rounded once when stored), float64 in double; the per-step coefficients are
 * computed in double and cast to the math type, as there. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/status.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"
#include "kernels/pw.h"

#define INVALID HPU_ERROR_INVALID_ARGUMENT

enum { ADAM_AMSGRAD = 1, ADAM_MAXIMIZE = 2, ADAM_DECOUPLED = 4 };
enum { SGD_NESTEROV = 1, SGD_MAXIMIZE = 2, SGD_FIRST = 4 };
enum { OPT_SCALE = 1, OPT_FOUND_INF = 2 };

static int same_shape(const hpu_tensor_t *a, const hpu_tensor_t *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d]) return 0;
  return 1;
}

hpu_status_t hpu_pw_validate_optim(const hpu_node_t *node) {
  const char *name = hpu_op_name(node->op);
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  hpu_status_t st;
  int adam = node->op == HPU_OP_FUSED_ADAM;
  int nout;
  if (adam) {
    nout = (p->i[0] & ADAM_AMSGRAD) ? 4 : 3;
  } else {
    nout = hpu_scalar_as_double(p->s[1]) != 0 ? 2 : 1;
  }
  if (node->num_outputs != nout)
    return hpu_error(INVALID, "%s: expects %d outputs (the parameter and its state), got %d", name,
                     nout, node->num_outputs);
  int extra = ((p->i[2] & OPT_SCALE) ? 1 : 0) + ((p->i[2] & OPT_FOUND_INF) ? 1 : 0);
  int nin = (adam ? 2 : 1) + extra;
  if (node->num_inputs != nin)
    return hpu_error(INVALID, "%s: expects %d inputs, got %d", name, nin, node->num_inputs);
  const hpu_tensor_t *param = &node->outputs[0];
  if (!hpu_dtype_is_floating(param->dtype))
    return hpu_error(HPU_ERROR_UNSUPPORTED, "%s: parameters must be floating point, not %s", name,
                     hpu_dtype_name(param->dtype));
  for (int i = 0; i < nout + 1; i++) {
    const hpu_tensor_t *t = i < nout ? &node->outputs[i] : &node->inputs[0];
    const char *role = i < nout ? "output" : "input";
    if ((st = hpu_check_tensor(name, role, i < nout ? i : 0, t))) return st;
    if (t->dtype != param->dtype || !same_shape(t, param))
      return hpu_error(INVALID,
                       "%s: %s %d must have the parameter's dtype and shape (%s); got %s", name,
                       role, i < nout ? i : 0, hpu_dtype_name(param->dtype),
                       hpu_dtype_name(t->dtype));
    if (i < nout && (st = hpu_check_output(name, t))) return st;
  }
  for (int i = 0; i < nout; i++)
    for (int j = 0; j < nout; j++)
      if (i != j && (st = hpu_check_overlap(name, &node->outputs[i], j, &node->outputs[j], 0)))
        return st;
  for (int i = 0; i < nout; i++)
    if ((st = hpu_check_overlap(name, &node->outputs[i], 0, &node->inputs[0], 0))) return st;
  for (int i = 1; i < nin; i++) {
    const hpu_tensor_t *t = &node->inputs[i];
    if ((st = hpu_check_tensor(name, "input", i, t))) return st;
    if (hpu_tensor_numel(t) != 1)
      return hpu_error(INVALID, "%s: input %d (%s) must have one element", name, i,
                       adam && i == 1 ? "the step" : "grad_scale / found_inf");
    if (!(adam && i == 1) && t->dtype != HPU_FLOAT32)
      return hpu_error(INVALID, "%s: grad_scale and found_inf must be float32, got %s", name,
                       hpu_dtype_name(t->dtype));
  }
  for (int k = 0; k < 6; k++)
    if ((st = hpu_check_scalar(name, "a parameter", p->s[k]))) return st;
  return HPU_SUCCESS;
}

/* Coefficients, in double as PyTorch computes them. */
typedef struct {
  int flags, has_scale;
  double lr, beta1, beta2, wd, eps, momentum, dampening;
  double step_size, c1, c2, bc2_sqrt;
  float scale;
  hpu_dtype_t dt;
  int nout;
} opt_ctx_t;

/* Adam on one element of math type W. */
#define ADAM_BODY(W, SQRT, FMA, ABS)                                                     \
  {                                                                                      \
    W g = *pg, prm = *pp;                                                                \
    if (c->has_scale) {                                                                  \
      g = g / (W)c->scale;                                                               \
      *pg = g;                                                                           \
    }                                                                                    \
    if (c->flags & ADAM_MAXIMIZE) g = g * (W)-1.0;                                       \
    if (c->wd != 0) {                                                                    \
      if (c->flags & ADAM_DECOUPLED) prm = prm * (W)(1 - c->lr * c->wd);                 \
      else g = g + prm * (W)c->wd;                                                       \
    }                                                                                    \
    W w = (W)c->c1, ea = *pea;                                                           \
    int small = ABS(w) < (W)0.5;                                                         \
    W coeff = small ? w : w - (W)1;                                                      \
    W base = small ? ea : g;                                                             \
    ea = FMA(coeff, g - ea, base);                                                       \
    W eas = *peas * (W)c->beta2 + (W)c->c2 * g * g;                                      \
    *pea = ea;                                                                           \
    *peas = eas;                                                                         \
    W v = eas;                                                                           \
    if (c->flags & ADAM_AMSGRAD) {                                                       \
      W mx = *pmx;                                                                       \
      mx = (mx != mx || eas != eas) ? mx + eas : (mx > eas ? mx : eas);                  \
      *pmx = mx;                                                                         \
      v = mx;                                                                            \
    }                                                                                    \
    W denom = (SQRT(v) / (W)c->bc2_sqrt) + (W)c->eps;                                    \
    *pp = prm + (W)(-c->step_size) * ea / denom;                                         \
  }

#define SGD_BODY(W)                                                                      \
  {                                                                                      \
    W g = *pg, prm = *pp;                                                                \
    if (c->has_scale) {                                                                  \
      g = g / (W)c->scale;                                                               \
      *pg = g;                                                                           \
    }                                                                                    \
    if (c->flags & SGD_MAXIMIZE) g = g * (W)-1.0;                                        \
    if (c->wd != 0) g = g + prm * (W)c->wd;                                              \
    if (c->momentum != 0) {                                                              \
      W buf = (c->flags & SGD_FIRST) ? g                                                 \
                                     : *pbuf * (W)c->momentum + g * (W)(1 - c->dampening); \
      *pbuf = buf;                                                                       \
      g = (c->flags & SGD_NESTEROV) ? g + buf * (W)c->momentum : buf;                    \
    }                                                                                    \
    *pp = prm + g * (W)(-c->lr);                                                         \
  }

/* Contiguous float32: vectorisable, with ISA clones. */
#define DEF_ADAM_F32(ISA)                                                                   \
  static HPU_ATTR_##ISA void adam_f32_##ISA(const opt_ctx_t *c, float *p0, float *ea0,      \
                                            float *eas0, float *mx0, float *g0, int64_t n) { \
    for (int64_t i = 0; i < n; i++) {                                                       \
      float *pp = p0 + i, *pea = ea0 + i, *peas = eas0 + i, *pg = g0 + i;                   \
      float *pmx = mx0 ? mx0 + i : pea;                                                     \
      ADAM_BODY(float, sqrtf, fmaf, fabsf)                                                  \
    }                                                                                       \
  }                                                                                         \
  static HPU_ATTR_##ISA void sgd_f32_##ISA(const opt_ctx_t *c, float *p0, float *b0,        \
                                           float *g0, int64_t n) {                          \
    for (int64_t i = 0; i < n; i++) {                                                       \
      float *pp = p0 + i, *pg = g0 + i, *pbuf = b0 ? b0 + i : pp;                           \
      SGD_BODY(float)                                                                       \
    }                                                                                       \
  }
DEF_ADAM_F32(generic)
#if HPU_HAVE_ISA_CLONES
DEF_ADAM_F32(avx2)
DEF_ADAM_F32(avx512)
#endif

/* Any layout and float dtype: through float (double for float64) locals. */
static void adam_generic(const opt_ctx_t *c, char **data, const int64_t *st, int64_t n) {
  hpu_dtype_t dt = c->dt;
  int ams = (c->flags & ADAM_AMSGRAD) != 0;
  int gi = ams ? 4 : 3;
  for (int64_t i = 0; i < n; i++) {
    char *q[5];
    for (int k = 0; k <= gi; k++) q[k] = data[k] + i * st[k];
    if (dt == HPU_FLOAT64) {
      double *pp = (double *)q[0], *pea = (double *)q[1], *peas = (double *)q[2];
      double *pmx = ams ? (double *)q[3] : pea, *pg = (double *)q[gi];
      ADAM_BODY(double, sqrt, fma, fabs)
    } else {
      float vp = hpu_load_f32(q[0], dt), vea = hpu_load_f32(q[1], dt);
      float veas = hpu_load_f32(q[2], dt), vg = hpu_load_f32(q[gi], dt);
      float vmx = ams ? hpu_load_f32(q[3], dt) : 0;
      float *pp = &vp, *pea = &vea, *peas = &veas, *pmx = &vmx, *pg = &vg;
      ADAM_BODY(float, sqrtf, fmaf, fabsf)
      hpu_store_f32(q[0], dt, vp);
      hpu_store_f32(q[1], dt, vea);
      hpu_store_f32(q[2], dt, veas);
      if (ams) hpu_store_f32(q[3], dt, vmx);
      if (c->has_scale) hpu_store_f32(q[gi], dt, vg);
    }
  }
}

static void sgd_generic(const opt_ctx_t *c, char **data, const int64_t *st, int64_t n) {
  hpu_dtype_t dt = c->dt;
  int hasbuf = c->nout == 2;
  int gi = hasbuf ? 2 : 1;
  for (int64_t i = 0; i < n; i++) {
    char *qp = data[0] + i * st[0], *qg = data[gi] + i * st[gi];
    char *qb = hasbuf ? data[1] + i * st[1] : qp;
    if (dt == HPU_FLOAT64) {
      double *pp = (double *)qp, *pg = (double *)qg, *pbuf = (double *)qb;
      SGD_BODY(double)
    } else {
      float vp = hpu_load_f32(qp, dt), vg = hpu_load_f32(qg, dt);
      float vb = hasbuf ? hpu_load_f32(qb, dt) : 0;
      float *pp = &vp, *pg = &vg, *pbuf = &vb;
      SGD_BODY(float)
      hpu_store_f32(qp, dt, vp);
      if (hasbuf) hpu_store_f32(qb, dt, vb);
      if (c->has_scale) hpu_store_f32(qg, dt, vg);
    }
  }
}

static void optim_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  (void)index;
  const opt_ctx_t *c = vctx;
  int adam = c->nout >= 3;
  int nops = c->nout + 1;
  int contig = c->dt == HPU_FLOAT32;
  for (int k = 0; k < nops && contig; k++) contig = st[k] == 4;
  if (!contig) {
    if (adam) adam_generic(c, data, st, n);
    else sgd_generic(c, data, st, n);
    return;
  }
  hpu_isa_t isa = hpu_kernels_isa();
  if (adam) {
    int ams = c->nout == 4;
    float *p = (float *)data[0], *ea = (float *)data[1], *eas = (float *)data[2];
    float *mx = ams ? (float *)data[3] : NULL, *g = (float *)data[ams ? 4 : 3];
#if HPU_HAVE_ISA_CLONES
    if (isa == HPU_ISA_AVX512) { adam_f32_avx512(c, p, ea, eas, mx, g, n); return; }
    if (isa == HPU_ISA_AVX2) { adam_f32_avx2(c, p, ea, eas, mx, g, n); return; }
#endif
    adam_f32_generic(c, p, ea, eas, mx, g, n);
  } else {
    float *p = (float *)data[0], *b = c->nout == 2 ? (float *)data[1] : NULL;
    float *g = (float *)data[c->nout];
#if HPU_HAVE_ISA_CLONES
    if (isa == HPU_ISA_AVX512) { sgd_f32_avx512(c, p, b, g, n); return; }
    if (isa == HPU_ISA_AVX2) { sgd_f32_avx2(c, p, b, g, n); return; }
#endif
    sgd_f32_generic(c, p, b, g, n);
  }
  (void)isa;
}

void hpu_pw_run_optim(const hpu_node_t *node) {
  const hpu_pointwise_params_t *p = &node->params.pointwise;
  int adam = node->op == HPU_OP_FUSED_ADAM;
  opt_ctx_t c;
  memset(&c, 0, sizeof c);
  c.nout = node->num_outputs;
  c.dt = node->outputs[0].dtype;
  int next = adam ? 2 : 1;
  if (p->i[2] & OPT_SCALE) {
    c.has_scale = 1;
    c.scale = *(const float *)hpu_tensor_data(&node->inputs[next++]);
  }
  if (p->i[2] & OPT_FOUND_INF) {
    if (*(const float *)hpu_tensor_data(&node->inputs[next]) == 1.0f) return;
  }
  if (hpu_tensor_numel(&node->outputs[0]) == 0) return;
  c.flags = (int)p->i[0];
  c.lr = hpu_scalar_as_double(p->s[0]);
  c.wd = hpu_scalar_as_double(p->s[3]);
  if (adam) {
    c.beta1 = hpu_scalar_as_double(p->s[1]);
    c.beta2 = hpu_scalar_as_double(p->s[2]);
    c.eps = hpu_scalar_as_double(p->s[4]);
    const hpu_tensor_t *stp = &node->inputs[1];
    double step = (double)hpu_load_f32((const char *)hpu_tensor_data(stp), stp->dtype);
    double bc1 = 1 - pow(c.beta1, step), bc2 = 1 - pow(c.beta2, step);
    c.c1 = 1 - c.beta1;
    c.c2 = 1 - c.beta2;
    c.bc2_sqrt = sqrt(bc2);
    c.step_size = c.lr / bc1;
  } else {
    c.momentum = hpu_scalar_as_double(p->s[1]);
    c.dampening = hpu_scalar_as_double(p->s[2]);
  }
  const hpu_tensor_t *ins[5];
  int n = 0;
  for (int k = 1; k < c.nout; k++) ins[n++] = &node->outputs[k];
  ins[n++] = &node->inputs[0];
  hpu_iter_t it;
  hpu_iter_build(&it, &node->outputs[0], ins, n, 0);
  hpu_iter_for_each(&it, optim_loop, &c, HPU_GRAIN);
}
