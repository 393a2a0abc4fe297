/* HPU_OP_COPY (strided, broadcast, any dtype -> any dtype) and HPU_OP_FILL.
 * One typed conversion loop per (source, destination) dtype pair, generated
 * by macros from per-dtype "load to a canonical value" / "store from a
 * canonical value" helpers. The canonical value is int64 for bool/integer
 * sources and double for floating sources, which reproduces c10::convert
 * (see cvt.h). Floating pairs also get AVX2 / AVX-512 clones. */
#include <stdint.h>
#include <string.h>

#include "hpu/parallel.h"
#include "kernels/bytes.h"
#include "kernels/cvt.h"
#include "kernels/isa.h"
#include "kernels/iter.h"
#include "kernels/kernels.h"

typedef uint8_t b8_t;
typedef uint8_t u8_t;
typedef int8_t i8_t;
typedef int16_t i16_t;
typedef int32_t i32_t;
typedef int64_t i64_t;
typedef uint16_t f16_t;
typedef uint16_t bf16_t;
typedef float f32_t;
typedef double f64_t;

/* Canonical category of each source type: I (int64) or F (double). */
#define CAT_b8 I
#define CAT_u8 I
#define CAT_i8 I
#define CAT_i16 I
#define CAT_i32 I
#define CAT_i64 I
#define CAT_f16 F
#define CAT_bf16 F
#define CAT_f32 F
#define CAT_f64 F

static inline int64_t ld_b8(b8_t x) { return x != 0; }
static inline int64_t ld_u8(u8_t x) { return x; }
static inline int64_t ld_i8(i8_t x) { return x; }
static inline int64_t ld_i16(i16_t x) { return x; }
static inline int64_t ld_i32(i32_t x) { return x; }
static inline int64_t ld_i64(i64_t x) { return x; }
static inline double ld_f16(f16_t x) { return hpu_cvt_half_f32(x); }
static inline double ld_bf16(bf16_t x) { return hpu_cvt_bf16_f32(x); }
static inline double ld_f32(f32_t x) { return x; }
static inline double ld_f64(f64_t x) { return x; }

#define TO_INT(N)                                                                   \
  static inline N##_t to_##N##_from_I(int64_t v) { return (N##_t)v; }             \
  static inline N##_t to_##N##_from_F(double d) { return (N##_t)hpu_f2i(d); }
TO_INT(u8)
TO_INT(i8)
TO_INT(i16)
TO_INT(i32)
TO_INT(i64)
static inline b8_t to_b8_from_I(int64_t v) { return v != 0; }
static inline b8_t to_b8_from_F(double d) { return d != 0; }
static inline f16_t to_f16_from_I(int64_t v) { return hpu_cvt_f32_half((float)v); }
static inline f16_t to_f16_from_F(double d) { return hpu_cvt_f32_half((float)d); }
static inline bf16_t to_bf16_from_I(int64_t v) { return hpu_cvt_f32_bf16((float)v); }
static inline bf16_t to_bf16_from_F(double d) { return hpu_cvt_f32_bf16((float)d); }
static inline f32_t to_f32_from_I(int64_t v) { return (float)v; }
static inline f32_t to_f32_from_F(double d) { return (float)d; }
static inline f64_t to_f64_from_I(int64_t v) { return (double)v; }
static inline f64_t to_f64_from_F(double d) { return d; }

#define PASTE3_(a, b, c) a##b##c
#define PASTE3(a, b, c) PASTE3_(a, b, c)
#define CVT(SN, DN, x) PASTE3(to_##DN, _from_, CAT_##SN)(ld_##SN(x))

typedef void (*cvt_fn)(char *d, int64_t ds, const char *s, int64_t ss, int64_t n);

#define DEF_CVT(SN, DN, ISA)                                                          \
  static HPU_ATTR_##ISA void cvt_##SN##_##DN##_##ISA(char *d, int64_t ds, const char *s, \
                                                     int64_t ss, int64_t n) {        \
    if (ds == (int64_t)sizeof(DN##_t) && ss == (int64_t)sizeof(SN##_t)) {            \
      DN##_t *dp = (DN##_t *)d;                                                      \
      const SN##_t *sp = (const SN##_t *)s;                                          \
      for (int64_t i = 0; i < n; i++) dp[i] = CVT(SN, DN, sp[i]);                    \
    } else if (ss == 0) {                                                            \
      DN##_t v = CVT(SN, DN, *(const SN##_t *)s);                                    \
      for (int64_t i = 0; i < n; i++) *(DN##_t *)(d + i * ds) = v;                   \
    } else {                                                                         \
      for (int64_t i = 0; i < n; i++)                                                \
        *(DN##_t *)(d + i * ds) = CVT(SN, DN, *(const SN##_t *)(s + i * ss));        \
    }                                                                                \
  }

#define DEF_CVT_ROW(SN, ISA)                                                            \
  DEF_CVT(SN, b8, ISA) DEF_CVT(SN, u8, ISA) DEF_CVT(SN, i8, ISA) DEF_CVT(SN, i16, ISA)  \
  DEF_CVT(SN, i32, ISA) DEF_CVT(SN, i64, ISA) DEF_CVT(SN, f16, ISA)                     \
  DEF_CVT(SN, bf16, ISA) DEF_CVT(SN, f32, ISA) DEF_CVT(SN, f64, ISA)
#define CVT_ROW(SN, ISA)                                                              \
  {cvt_##SN##_b8_##ISA, cvt_##SN##_u8_##ISA, cvt_##SN##_i8_##ISA, cvt_##SN##_i16_##ISA, \
   cvt_##SN##_i32_##ISA, cvt_##SN##_i64_##ISA, cvt_##SN##_f16_##ISA,                   \
   cvt_##SN##_bf16_##ISA, cvt_##SN##_f32_##ISA, cvt_##SN##_f64_##ISA}

DEF_CVT_ROW(b8, generic)
DEF_CVT_ROW(u8, generic)
DEF_CVT_ROW(i8, generic)
DEF_CVT_ROW(i16, generic)
DEF_CVT_ROW(i32, generic)
DEF_CVT_ROW(i64, generic)
DEF_CVT_ROW(f16, generic)
DEF_CVT_ROW(bf16, generic)
DEF_CVT_ROW(f32, generic)
DEF_CVT_ROW(f64, generic)

/* [src][dst], in hpu_dtype_t order. */
static const cvt_fn cvt_generic[HPU_DTYPE_COUNT][HPU_DTYPE_COUNT] = {
    CVT_ROW(b8, generic),  CVT_ROW(u8, generic),  CVT_ROW(i8, generic), CVT_ROW(i16, generic),
    CVT_ROW(i32, generic), CVT_ROW(i64, generic), CVT_ROW(f16, generic),
    CVT_ROW(bf16, generic), CVT_ROW(f32, generic), CVT_ROW(f64, generic)};

/* ISA clones of the floating <-> floating/int32 conversions (autocast casts). */
#define DEF_FLOAT_CLONES(ISA)                                                       \
  DEF_CVT(f32, bf16, ISA) DEF_CVT(bf16, f32, ISA) DEF_CVT(f32, f16, ISA)            \
  DEF_CVT(f16, f32, ISA) DEF_CVT(f32, f64, ISA) DEF_CVT(f64, f32, ISA)              \
  DEF_CVT(bf16, f64, ISA) DEF_CVT(f64, bf16, ISA) DEF_CVT(i32, f32, ISA)            \
  DEF_CVT(i64, f32, ISA) DEF_CVT(f32, i32, ISA) DEF_CVT(f32, i64, ISA)
#if HPU_HAVE_ISA_CLONES
DEF_FLOAT_CLONES(avx2)
DEF_FLOAT_CLONES(avx512)
#define CLONE_CASE(S, D, SN, DN, ISA) \
  if (s == S && d == D) return cvt_##SN##_##DN##_##ISA;
#define CLONE_CASES(ISA)                                  \
  CLONE_CASE(HPU_FLOAT32, HPU_BFLOAT16, f32, bf16, ISA)   \
  CLONE_CASE(HPU_BFLOAT16, HPU_FLOAT32, bf16, f32, ISA)   \
  CLONE_CASE(HPU_FLOAT32, HPU_FLOAT16, f32, f16, ISA)     \
  CLONE_CASE(HPU_FLOAT16, HPU_FLOAT32, f16, f32, ISA)     \
  CLONE_CASE(HPU_FLOAT32, HPU_FLOAT64, f32, f64, ISA)     \
  CLONE_CASE(HPU_FLOAT64, HPU_FLOAT32, f64, f32, ISA)     \
  CLONE_CASE(HPU_BFLOAT16, HPU_FLOAT64, bf16, f64, ISA)   \
  CLONE_CASE(HPU_FLOAT64, HPU_BFLOAT16, f64, bf16, ISA)   \
  CLONE_CASE(HPU_INT32, HPU_FLOAT32, i32, f32, ISA)       \
  CLONE_CASE(HPU_INT64, HPU_FLOAT32, i64, f32, ISA)       \
  CLONE_CASE(HPU_FLOAT32, HPU_INT32, f32, i32, ISA)       \
  CLONE_CASE(HPU_FLOAT32, HPU_INT64, f32, i64, ISA)
#endif

static cvt_fn pick_cvt(hpu_dtype_t s, hpu_dtype_t d) {
#if HPU_HAVE_ISA_CLONES
  hpu_isa_t isa = hpu_kernels_isa();
  if (isa == HPU_ISA_AVX512) { CLONE_CASES(avx512) }
  if (isa == HPU_ISA_AVX2) { CLONE_CASES(avx2) }
#endif
  return cvt_generic[s][d];
}

/* Same-dtype copies move bytes. */
static void move_bytes(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t esz) {
  if (ds == (int64_t)esz && ss == (int64_t)esz) {
    hpu_copy_bytes(d, s, (size_t)n * esz);
    return;
  }
  switch (esz) {
#define MOVE(T)                                                                  \
  for (int64_t i = 0; i < n; i++) *(T *)(d + i * ds) = *(const T *)(s + i * ss); \
  break;
    case 1: MOVE(uint8_t)
    case 2: MOVE(uint16_t)
    case 4: MOVE(uint32_t)
    default: MOVE(uint64_t)
#undef MOVE
  }
}

typedef struct {
  cvt_fn fn;   /* NULL: same dtype */
  size_t esz;
} copy_ctx_t;

static void copy_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  (void)index;
  const copy_ctx_t *c = vctx;
  if (c->fn) c->fn(data[0], st[0], data[1], st[1], n);
  else move_bytes(data[0], st[0], data[1], st[1], n, c->esz);
}

/* Same-dtype copies of short rows, contiguous on both sides but not next to
 * each other (a cat along the last dim, a narrow of it): the rows are
 * stepped through with their pointers carried from one to the next. Through
 * the iterator each row paid for recomputing its pointers and two indirect
 * calls, which for 256-byte rows cost 2-3 times the copy itself. */
#define ROWS_MAX_ELEMS 4096

typedef struct {
  const hpu_iter_t *it;
  size_t row_bytes;
} rows_ctx_t;

static void copy_rows(void *vctx, int64_t begin, int64_t end) {
  const rows_ctx_t *c = vctx;
  const hpu_iter_t *it = c->it;
  int64_t counter[HPU_MAX_DIMS] = {0}, rem = begin;
  char *d = it->data[0];
  const char *s = it->data[1];
  for (int k = 1; k < it->ndim; k++) {
    counter[k] = rem % it->shape[k];
    rem /= it->shape[k];
    d += counter[k] * it->strides[k][0];
    s += counter[k] * it->strides[k][1];
  }
  for (int64_t r = begin; r < end; r++) {
    hpu_copy_bytes(d, s, c->row_bytes);
    d += it->strides[1][0];
    s += it->strides[1][1];
    counter[1]++;
    for (int k = 1; k < it->ndim - 1 && counter[k] == it->shape[k]; k++) {
      d += it->strides[k + 1][0] - counter[k] * it->strides[k][0];
      s += it->strides[k + 1][1] - counter[k] * it->strides[k][1];
      counter[k] = 0;
      counter[k + 1]++;
    }
  }
}

void hpu_copy_tensor(const hpu_tensor_t *dst, const hpu_tensor_t *src) {
  const hpu_tensor_t *ins[1] = {src};
  hpu_iter_t it;
  hpu_iter_build(&it, dst, ins, 1, 0);
  copy_ctx_t c = {NULL, hpu_dtype_size(dst->dtype)};
  if (src->dtype != dst->dtype) c.fn = pick_cvt(src->dtype, dst->dtype);
  else if (it.data[0] == it.data[1] && it.strides[0][0] == it.strides[0][1] &&
           hpu_iter_is_contiguous(&it))
    return; /* copy onto itself */
  if (!c.fn && it.ndim >= 2 && it.shape[0] <= ROWS_MAX_ELEMS && it.strides[0][0] == (int64_t)c.esz &&
      it.strides[0][1] == (int64_t)c.esz) {
    rows_ctx_t rc = {&it, (size_t)it.shape[0] * c.esz};
    int64_t grain = HPU_GRAIN / it.shape[0];
    hpu_parallel_for(it.numel / it.shape[0], grain > 0 ? grain : 1, copy_rows, &rc);
    return;
  }
  hpu_iter_for_each(&it, copy_loop, &c, HPU_GRAIN);
}

void hpu_kernel_copy(const hpu_node_t *node) {
  hpu_copy_tensor(&node->outputs[0], &node->inputs[0]);
}

/* FILL ----------------------------------------------------------------------- */

typedef struct {
  size_t esz;
  uint64_t bits;
} fill_ctx_t;

static void fill_loop(void *vctx, char **data, const int64_t *st, int64_t n, int64_t index) {
  (void)index;
  const fill_ctx_t *c = vctx;
  char *d = data[0];
  int64_t ds = st[0];
  switch (c->esz) {
#define FILL(T)                                                \
  {                                                            \
    T v;                                                       \
    memcpy(&v, &c->bits, sizeof v);                            \
    if (ds == (int64_t)sizeof(T)) {                            \
      T *p = (T *)d;                                           \
      for (int64_t i = 0; i < n; i++) p[i] = v;                \
    } else {                                                   \
      for (int64_t i = 0; i < n; i++) *(T *)(d + i * ds) = v;  \
    }                                                          \
    break;                                                     \
  }
    case 1: FILL(uint8_t)
    case 2: FILL(uint16_t)
    case 4: FILL(uint32_t)
    default: FILL(uint64_t)
#undef FILL
  }
}

void hpu_kernel_fill(const hpu_node_t *node) {
  const hpu_tensor_t *out = &node->outputs[0];
  hpu_scalar_t v = node->params.fill.value;
  fill_ctx_t c = {hpu_dtype_size(out->dtype), 0};
  if (v.kind == HPU_SCALAR_FLOAT) hpu_store_f64((char *)&c.bits, out->dtype, v.f);
  else hpu_store_i64((char *)&c.bits, out->dtype, v.i);
  hpu_iter_t it;
  hpu_iter_build(&it, out, NULL, 0, 0);
  hpu_iter_for_each(&it, fill_loop, &c, HPU_GRAIN);
}
