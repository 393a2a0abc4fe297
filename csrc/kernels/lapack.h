/* The Fortran LAPACK routines the linalg kernels call, as the OpenBLAS the
 * core links exports them (Debian's libopenblas carries LAPACK; no LAPACKE).
 * In a PyTorch process the MKL inside libtorch_cpu.so exports the same
 * names and the dynamic linker finds it first, so there these reach MKL:
 * only the Fortran ABI below is relied on, never one library's behaviour.
 * Every argument by pointer, matrices column-major; each character argument
 * has a hidden length after the others (gfortran's ABI; OpenBLAS's own C
 * implementations of some routines ignore them). blasint is OpenBLAS's
 * Fortran integer. */
#ifndef HPU_KERNELS_LAPACK_H
#define HPU_KERNELS_LAPACK_H

#include <cblas.h>
#include <stddef.h>

#define HPU_LAPACK_REAL(T, p)                                                                      \
  void p##getrf_(const blasint *m, const blasint *n, T *a, const blasint *lda, blasint *ipiv,      \
                 blasint *info);                                                                   \
  void p##getrs_(const char *trans, const blasint *n, const blasint *nrhs, const T *a,             \
                 const blasint *lda, const blasint *ipiv, T *b, const blasint *ldb, blasint *info, \
                 size_t trans_len);                                                                \
  void p##potrf_(const char *uplo, const blasint *n, T *a, const blasint *lda, blasint *info,      \
                 size_t uplo_len);                                                                 \
  void p##gesdd_(const char *jobz, const blasint *m, const blasint *n, T *a, const blasint *lda,   \
                 T *s, T *u, const blasint *ldu, T *vt, const blasint *ldvt, T *work,              \
                 const blasint *lwork, blasint *iwork, blasint *info, size_t jobz_len);            \
  void p##syevd_(const char *jobz, const char *uplo, const blasint *n, T *a, const blasint *lda,   \
                 T *w, T *work, const blasint *lwork, blasint *iwork, const blasint *liwork,       \
                 blasint *info, size_t jobz_len, size_t uplo_len);                                 \
  void p##geqrf_(const blasint *m, const blasint *n, T *a, const blasint *lda, T *tau, T *work,    \
                 const blasint *lwork, blasint *info);                                             \
  void p##orgqr_(const blasint *m, const blasint *n, const blasint *k, T *a, const blasint *lda,   \
                 const T *tau, T *work, const blasint *lwork, blasint *info);                      \
  void p##ormqr_(const char *side, const char *trans, const blasint *m, const blasint *n,          \
                 const blasint *k, const T *a, const blasint *lda, const T *tau, T *c,             \
                 const blasint *ldc, T *work, const blasint *lwork, blasint *info,                 \
                 size_t side_len, size_t trans_len);                                               \
  void p##sytrf_(const char *uplo, const blasint *n, T *a, const blasint *lda, blasint *ipiv,      \
                 T *work, const blasint *lwork, blasint *info, size_t uplo_len);                   \
  void p##sytrs_(const char *uplo, const blasint *n, const blasint *nrhs, const T *a,              \
                 const blasint *lda, const blasint *ipiv, T *b, const blasint *ldb, blasint *info, \
                 size_t uplo_len);                                                                 \
  void p##gelsy_(const blasint *m, const blasint *n, const blasint *nrhs, T *a, const blasint *lda, \
                 T *b, const blasint *ldb, blasint *jpvt, const T *rcond, blasint *rank, T *work,  \
                 const blasint *lwork, blasint *info);                                             \
  void p##gels_(const char *trans, const blasint *m, const blasint *n, const blasint *nrhs, T *a,  \
                const blasint *lda, T *b, const blasint *ldb, T *work, const blasint *lwork,       \
                blasint *info, size_t trans_len);

HPU_LAPACK_REAL(float, s)
HPU_LAPACK_REAL(double, d)
#undef HPU_LAPACK_REAL

#endif
