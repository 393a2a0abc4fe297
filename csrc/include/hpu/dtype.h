/* Element types of the core. Complex and quantized types are not supported. */
#ifndef HPU_DTYPE_H
#define HPU_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hpu_dtype {
  HPU_BOOL = 0,
  HPU_UINT8,
  HPU_INT8,
  HPU_INT16,
  HPU_INT32,
  HPU_INT64,
  HPU_FLOAT16,
  HPU_BFLOAT16,
  HPU_FLOAT32,
  HPU_FLOAT64,
  HPU_DTYPE_COUNT
} hpu_dtype_t;

size_t hpu_dtype_size(hpu_dtype_t dtype);       /* 0 for an invalid dtype */
const char *hpu_dtype_name(hpu_dtype_t dtype);  /* "float32", ...; "invalid" */
int hpu_dtype_is_floating(hpu_dtype_t dtype);
int hpu_dtype_is_valid(hpu_dtype_t dtype);

/* PyTorch's promotion of two tensor dtypes of the same category rank
 * (torch.promote_types). */
hpu_dtype_t hpu_promote_types(hpu_dtype_t a, hpu_dtype_t b);

/* A scalar argument, as PyTorch's c10::Scalar: real or integral or bool. */
typedef enum hpu_scalar_kind { HPU_SCALAR_FLOAT, HPU_SCALAR_INT, HPU_SCALAR_BOOL } hpu_scalar_kind_t;
typedef struct hpu_scalar {
  hpu_scalar_kind_t kind;
  double f;   /* valid for HPU_SCALAR_FLOAT */
  int64_t i;  /* valid for HPU_SCALAR_INT and HPU_SCALAR_BOOL */
} hpu_scalar_t;

static inline hpu_scalar_t hpu_scalar_float(double v) { hpu_scalar_t s = {HPU_SCALAR_FLOAT, v, 0}; return s; }
static inline hpu_scalar_t hpu_scalar_int(int64_t v) { hpu_scalar_t s = {HPU_SCALAR_INT, (double)v, v}; return s; }
static inline double hpu_scalar_as_double(hpu_scalar_t s) { return s.kind == HPU_SCALAR_FLOAT ? s.f : (double)s.i; }

/* bf16 and fp16 are stored as uint16_t bit patterns. Round-to-nearest-even,
 * NaN preserved, as c10::BFloat16 / c10::Half. */
float hpu_bf16_to_float(uint16_t v);
uint16_t hpu_float_to_bf16(float v);
float hpu_half_to_float(uint16_t v);
uint16_t hpu_float_to_half(float v);

#ifdef __cplusplus
}
#endif
#endif
