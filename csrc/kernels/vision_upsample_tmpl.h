/* The arithmetic of vision_upsample.c for one element type, included there
 * with T (float / double) and FN(x) (the name's suffix): the tap table (its
 * weights in T, as the CPU computes them in the input's opmath type), the
 * linear forward and the backward. The float copy is the float code it
 * always was. */

/* Per output index of one dim: the two source indices and their weights
 * (nearest: i1 = i0, w0 = 1, w1 = 0). */
typedef struct {
  int64_t i0, i1;
  T w0, w1;
} FN(tap_t);

typedef struct {
  const hpu_node_t *n;
  FN(tap_t) *tap[3]; /* D, H, W */
} FN(ctx_t);

static T FN(round_weight)(T w, int64_t wdt) {
  if (wdt == HPU_BFLOAT16) return (T)hpu_bf16_to_float(hpu_float_to_bf16((float)w));
  if (wdt == HPU_FLOAT16) return (T)hpu_half_to_float(hpu_float_to_half((float)w));
  return w;
}

static void FN(fill_taps)(FN(tap_t) *t, int mode, int align, double scale, int64_t in, int64_t out, int64_t wdt) {
  if (mode != HPU_UPSAMPLE_LINEAR) {
    for (int64_t o = 0; o < out; o++) {
      int64_t i = nearest_index(mode, scale, in, out, o);
      t[o] = (FN(tap_t)){i, i, 1, 0};
    }
    return;
  }
  T ratio = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : 0) : (scale > 0. ? (T)(1.0 / scale) : (T)in / (T)out);
  for (int64_t o = 0; o < out; o++) {
    if (out == in) {
      t[o] = (FN(tap_t)){o, o, 1, 0};
      continue;
    }
    T real = align ? ratio * (T)o : ratio * ((T)o + (T)0.5) - (T)0.5;
    if (!align && real < 0) real = 0;
    /* floorf, also for double: the CPU's guard_index_and_lambda */
    int64_t i0 = (int64_t)floorf((float)real);
    if (i0 > in - 1) i0 = in - 1;
    T l1 = real - (T)i0;
    l1 = l1 < 0 ? 0 : (l1 > 1 ? 1 : l1);
    l1 = FN(round_weight)(l1, wdt);
    t[o] = (FN(tap_t)){i0, i0 + (i0 < in - 1 ? 1 : 0), FN(round_weight)((T)1 - l1, wdt), l1};
  }
}

static inline T FN(lerp_w)(const T *row, const FN(tap_t) *tw) {
  return row[tw->i0] * tw->w0 + row[tw->i1] * tw->w1;
}

static void FN(linear_planes)(void *vc, int64_t p0, int64_t p1) {
  const FN(ctx_t) *c = vc;
  const hpu_tensor_t *xt = &c->n->inputs[0], *yt = &c->n->outputs[0];
  int nd = (int)c->n->params.nn.i[2];
  int64_t D = xt->sizes[1], H = xt->sizes[2], W = xt->sizes[3];
  int64_t OD = yt->sizes[1], OH = yt->sizes[2], OW = yt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const T *x = (const T *)hpu_tensor_data(xt) + q * D * H * W;
    T *y = (T *)hpu_tensor_data(yt) + q * OD * OH * OW;
    for (int64_t od = 0; od < OD; od++) {
      const FN(tap_t) *td = &c->tap[0][od];
      for (int64_t oh = 0; oh < OH; oh++) {
        const FN(tap_t) *th = &c->tap[1][oh];
        T *yr = y + (od * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ow++) {
          const FN(tap_t) *tw = &c->tap[2][ow];
          T v;
          if (nd == 1) {
            v = FN(lerp_w)(x + (td->i0 * H + th->i0) * W, tw);
          } else if (nd == 2) {
            const T *pl = x + td->i0 * H * W;
            v = FN(lerp_w)(pl + th->i0 * W, tw) * th->w0 + FN(lerp_w)(pl + th->i1 * W, tw) * th->w1;
          } else {
            const T *a = x + td->i0 * H * W, *b = x + td->i1 * H * W;
            T ta = FN(lerp_w)(a + th->i0 * W, tw) * th->w0 + FN(lerp_w)(a + th->i1 * W, tw) * th->w1;
            T tb = FN(lerp_w)(b + th->i0 * W, tw) * th->w0 + FN(lerp_w)(b + th->i1 * W, tw) * th->w1;
            v = ta * td->w0 + tb * td->w1;
          }
          yr[ow] = v;
        }
      }
    }
  }
}

/* dx[corner] += (w_d * w_h * w_w) * dy over the 2^nd corners, d outermost,
 * the weight product left to right over the op's own dims only (the CPU's
 * h0lambda * w0lambda * grad for 2-d). Nearest: one corner, weight 1. */
static void FN(backward_planes)(void *vc, int64_t p0, int64_t p1) {
  const FN(ctx_t) *c = vc;
  const hpu_tensor_t *gt = &c->n->inputs[0], *dt = &c->n->outputs[0];
  int nd = (int)c->n->params.nn.i[2];
  int nearest = c->n->params.nn.i[0] != HPU_UPSAMPLE_LINEAR;
  int64_t D = dt->sizes[1], H = dt->sizes[2], W = dt->sizes[3];
  int64_t OD = gt->sizes[1], OH = gt->sizes[2], OW = gt->sizes[3];
  for (int64_t q = p0; q < p1; q++) {
    const T *g = (const T *)hpu_tensor_data(gt) + q * OD * OH * OW;
    T *dx = (T *)hpu_tensor_data(dt) + q * D * H * W;
    memset(dx, 0, (size_t)(D * H * W) * sizeof(T));
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          T gv = g[(od * OH + oh) * OW + ow];
          const FN(tap_t) *t3[3] = {&c->tap[0][od], &c->tap[1][oh], &c->tap[2][ow]};
          if (nearest) {
            dx[(t3[0]->i0 * H + t3[1]->i0) * W + t3[2]->i0] += gv;
            continue;
          }
          int first = 3 - nd;
          for (int corner = 0; corner < (1 << nd); corner++) {
            int64_t idx[3] = {t3[0]->i0, t3[1]->i0, t3[2]->i0};
            T w = 0;
            for (int k = first; k < 3; k++) {
              int bit = (corner >> (2 - k)) & 1;
              T wk = bit ? t3[k]->w1 : t3[k]->w0;
              if (bit) idx[k] = t3[k]->i1;
              w = k == first ? wk : w * wk;
            }
            dx[(idx[0] * H + idx[1]) * W + idx[2]] += w * gv;
          }
        }
  }
}

/* The taps of the three dims, then `fn` (NULL: this type's linear forward
 * or backward) over the planes. */
static hpu_status_t FN(run)(const hpu_node_t *n, hpu_range_fn fn) {
  const hpu_nn_params_t *p = &n->params.nn;
  int fwd = n->op == HPU_OP_UPSAMPLE;
  const hpu_tensor_t *x = fwd ? &n->inputs[0] : &n->outputs[0], *y = fwd ? &n->outputs[0] : &n->inputs[0];
  FN(ctx_t) c = {n, {0}};
  int64_t total = y->sizes[1] + y->sizes[2] + y->sizes[3];
  FN(tap_t) *all = malloc((size_t)total * sizeof(FN(tap_t)));
  if (!all) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "%s: no memory for %lld taps", hpu_op_name(n->op), (long long)total);
  int64_t off = 0;
  for (int d = 0; d < 3; d++) {
    c.tap[d] = all + off;
    FN(fill_taps)(c.tap[d], (int)p->i[0], (int)p->i[1], hpu_scalar_as_double(p->s[d]), x->sizes[1 + d],
                  y->sizes[1 + d], fwd ? p->i[3] : HPU_FLOAT32);
    off += y->sizes[1 + d];
  }
  if (!fn) fn = fwd ? FN(linear_planes) : FN(backward_planes);
  hpu_parallel_for(x->sizes[0], 1, fn, &c);
  free(all);
  return HPU_SUCCESS;
}
