/* The float row kernels of the nn family (defined in nn_norm.c), shared by
 * the norms: each a loop over n contiguous floats, compiled as generic,
 * AVX2 and AVX-512 clones; hpu_nn_rows() picks this CPU's. The reductions
 * keep 64 lanes in four groups folded in one fixed order, so every ISA
 * gives the same bits. */
#ifndef HPU_KERNELS_NN_ROWS_H
#define HPU_KERNELS_NN_ROWS_H

#include <stdint.h>

#include "hpu/dtype.h"
#include "hpu/tensor.h"

typedef struct hpu_nn_rows {
  float (*max)(const float *x, int64_t n);
  /* y = exp(x - c); returns sum(y) */
  float (*exp)(const float *x, float *y, int64_t n, float c);
  /* sum(exp(x - c)) */
  float (*expsum)(const float *x, int64_t n, float c);
  /* y = y * a + b, and y = x * a + b */
  void (*scale)(float *y, int64_t n, float a, float b);
  void (*affine)(const float *x, float *y, int64_t n, float a, float b);
  float (*sum)(const float *x, int64_t n);
  /* sum((x - c)^2) */
  float (*ssd)(const float *x, int64_t n, float c);
  float (*dot)(const float *x, const float *y, int64_t n);
  /* y = (x - mean) * rstd * w + b */
  void (*norm)(const float *x, float *y, int64_t n, float mean, float rstd, const float *w,
               const float *b);
  /* softmax / log_softmax backward */
  void (*smb)(const float *g, const float *y, float *dx, int64_t n, float dot);
  void (*lsmb)(const float *g, const float *y, float *dx, int64_t n, float s);
  /* layer norm backward of one row */
  void (*lnb)(const float *dy, const float *x, const float *w, float *dx, float *dg, float *db,
              int64_t n, float mean, float rstd, int want_dx);
  /* y = (x - mean) * rstd */
  void (*center)(const float *x, float *y, int64_t n, float mean, float rstd);
  /* y = a * u + b * v + c */
  void (*axpby)(const float *u, const float *v, float *y, int64_t n, float a, float b, float c);
  /* bf16 rows without a float copy: sum(x * y) with sum(y) into *sy (the
   * bits of dot and sum over the converted rows), and axpby rounded to bf16 */
  float (*dotsum_bf16)(const uint16_t *x, const uint16_t *y, int64_t n, float *sy);
  void (*axpby_bf16)(const uint16_t *u, const uint16_t *v, uint16_t *y, int64_t n, float a, float b,
                     float c);
  /* y = x * a + b rounded to bf16 (affine, then the bf16 store, in one pass) */
  void (*affine_bf16)(const float *x, uint16_t *y, int64_t n, float a, float b);
  /* softmax backward over bf16 rows: dx = y * (g - dot) rounded to bf16 */
  void (*smb_bf16)(const uint16_t *g, const uint16_t *y, uint16_t *dx, int64_t n, float dot);
} hpu_nn_rows_t;

const hpu_nn_rows_t *hpu_nn_rows(void);

/* n elements of dtype dt at src into floats, and back (rounding to dt). */
void hpu_nn_load_row(float *dst, const char *src, int64_t n, hpu_dtype_t dt);
void hpu_nn_store_row(char *dst, const float *src, int64_t n, hpu_dtype_t dt);

/* x rounded in place to bf16 or fp16 (the value a store and load would
 * give), also stored as dt at dst unless dst is NULL: one pass. */
void hpu_nn_round_row(float *x, char *dst, int64_t n, hpu_dtype_t dt);

/* Float and double copies of an optional [n] parameter t (fill where t is
 * NULL), malloc'd into *f and *d; -1 (both NULL) when memory runs out. */
int hpu_nn_param_copy(const hpu_tensor_t *t, int64_t n, float fill, float **f, double **d);

#endif
