/* Orthogonal polynomials p_n(x) by their three-term recurrences, as
 * PyTorch's CPU evaluates them, in float for the float family and in double
 * for float64 (the recurrences amplify rounding, so evaluating a float
 * input in double would give a different answer for large n). Chebyshev
 * polynomials of high degree inside (-1, 1) use their trigonometric forms
 * (T_n(cos t) = cos(n t), ...); n is truncated to an integer, and n < 0, NaN
 * or infinite gives 0. Hermite polynomials beyond degree 128 (float) / 512
 * (double) are NaN, as on the CPU (the values overflow long before). */
#include <stdint.h>
#include <tgmath.h> /* one body per polynomial for float and double */

#include "kernels/special.h"

/* n as C++'s static_cast<int64_t> gives it on x86-64 (NaN and out of range:
 * INT64_MIN), without the undefined behaviour of that cast in C. */
static int64_t degree(double n) {
  return n == n && n > -9.2e18 && n < 9.2e18 ? (int64_t)n : INT64_MIN;
}

/* The recurrence r = s q - p from p = 1, q = q1, for k = 2..n; s = 2 x. */
#define RECUR(T, s, q1, n)                                  \
  T p = 1, q = (q1), r = q;                                 \
  for (int64_t k = 2; k <= (n) && !isnan(q); k++) {         \
    r = (s) * q - p;                                        \
    p = q;                                                  \
    q = r;                                                  \
  }                                                         \
  return r;

#define CHEB_T(T, x, n)                                                 \
  if (n < 0) return 0;                                                  \
  if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? (T)1 : (T)-1;        \
  if (n > 6 && fabs(x) < 1) return cos((T)n * acos(x));                 \
  if (n == 0) return 1;                                                 \
  if (n == 1) return x;                                                 \
  RECUR(T, x + x, x, n)

#define CHEB_U(T, x, n)                                                          \
  if (n < 0) return 0;                                                           \
  if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? (T)(n + 1) : (T) - (n + 1);    \
  if (n > 8 && fabs(x) < 1) {                                                    \
    T t = acos(x);                                                               \
    if (sin(t) != 0) return sin((T)(n + 1) * t) / sin(t);                        \
    return (T)(n + 1) * cos((T)(n + 1) * t) / x;                                 \
  }                                                                              \
  if (n == 0) return 1;                                                          \
  if (n == 1) return x + x;                                                      \
  RECUR(T, x + x, x + x, n)

#define CHEB_V(T, x, n)                                                          \
  if (n < 0) return 0;                                                           \
  if (fabs(x) == 1) {                                                            \
    if (x > 0) return 1;                                                         \
    return n % 2 == 0 ? (T)(n + n + 1) : (T) - (n + n + 1);                      \
  }                                                                              \
  if (n > 8 && fabs(x) < 1) {                                                    \
    T t = acos(x);                                                               \
    if (sin(t / (T)2) != 1) return cos(((T)n + (T)0.5) * t) / cos(t / (T)2);     \
    return n % 2 == 0 ? (T)(n + n + 1) : (T) - (n + n + 1);                      \
  }                                                                              \
  if (n == 0) return 1;                                                          \
  if (n == 1) return x + x - 1;                                                  \
  RECUR(T, x + x, x + x - 1, n)

#define CHEB_W(T, x, n)                                                          \
  if (n < 0) return 0;                                                           \
  if (fabs(x) == 1) {                                                            \
    if (x > 0) return (T)(n + n + 1);                                            \
    return n % 2 == 0 ? (T)1 : (T)-1;                                            \
  }                                                                              \
  if (n > 8 && fabs(x) < 1) {                                                    \
    T t = acos(x);                                                               \
    if (cos(t / (T)2) != 1) return sin(((T)n + (T)0.5) * t) / sin(t / (T)2);     \
    if (x > 0) return (T)(n + n + 1);                                            \
    return n % 2 == 0 ? (T)1 : (T)-1;                                            \
  }                                                                              \
  if (n == 0) return 1;                                                          \
  if (n == 1) return x + x + 1;                                                  \
  RECUR(T, x + x, x + x + 1, n)

/* Shifted: p*_n(x) = p_n(2x - 1), with the CPU's own endpoint and
 * trigonometric-form thresholds (W switches at n > 4, the others at 6). */
#define SCHEB_T(T, x, n)                                                 \
  T y = x + x - 1;                                                       \
  if (n < 0) return 0;                                                   \
  if (x == 1) return 1;                                                  \
  if (x == 0) return n % 2 == 0 ? (T)1 : (T)-1;                          \
  if (n > 6 && fabs(y) < 1) return cos((T)n * acos(y));                  \
  if (n == 0) return 1;                                                  \
  if (n == 1) return y;                                                  \
  RECUR(T, y + y, y, n)

#define SCHEB_U(T, x, n)                                                 \
  T y = x + x - 1;                                                       \
  if (n < 0) return 0;                                                   \
  if (x == 1) return (T)(n + 1);                                         \
  if (x == 0) return n % 2 == 0 ? (T)(n + 1) : (T) - (n + 1);            \
  if (n > 6 && fabs(y) < 1) {                                            \
    T t = acos(y);                                                       \
    if (sin(t) != 0) return sin((T)(n + 1) * t) / sin(t);                \
    return (T)(n + 1) * cos((T)(n + 1) * t) / y;                         \
  }                                                                      \
  if (n == 0) return 1;                                                  \
  if (n == 1) return y + y;                                              \
  RECUR(T, y + y, y + y, n)

#define SCHEB_V(T, x, n)                                                      \
  T y = x + x - 1;                                                            \
  if (n < 0) return 0;                                                        \
  if (x == 1) return 1;                                                       \
  if (x == 0) return n % 2 == 0 ? (T)(n + n + 1) : (T) - (n + n + 1);         \
  if (n > 6 && fabs(y) < 1) {                                                 \
    T t = acos(y);                                                            \
    if (sin(t / (T)2) != 1) return cos(((T)n + (T)0.5) * t) / cos(t / (T)2);  \
    return n % 2 == 0 ? (T)(n + n + 1) : (T) - (n + n + 1);                   \
  }                                                                           \
  if (n == 0) return 1;                                                       \
  if (n == 1) return y + y - 1;                                               \
  RECUR(T, y + y, y + y - 1, n)

#define SCHEB_W(T, x, n)                                                      \
  T y = x + x - 1;                                                            \
  if (n < 0) return 0;                                                        \
  if (x == 1) return (T)(n + n + 1);                                          \
  if (x == 0) return n % 2 == 0 ? (T)1 : (T)-1;                               \
  if (n > 4 && fabs(y) < 1) {                                                 \
    T t = acos(y);                                                            \
    if (cos(t / (T)2) != 1) return sin(((T)n + (T)0.5) * t) / sin(t / (T)2);  \
    return n % 2 == 0 ? (T)1 : (T)-1;                                         \
  }                                                                           \
  if (n == 0) return 1;                                                       \
  if (n == 1) return y + y + 1;                                               \
  RECUR(T, y + y, y + y + 1, n)

/* Physicists' Hermite: H_{k+1} = 2x H_k - 2k H_{k-1} */
#define HERM_H(T, x, n)                                        \
  if (n < 0) return 0;                                         \
  if (n == 0) return 1;                                        \
  if (n == 1) return x + x;                                    \
  if (n > (sizeof(T) == sizeof(float) ? 128 : 512)) return NAN; \
  T p = 1, q = x + x, r = 0;                                   \
  for (int64_t k = 2; k < n + n; k += 2) {                     \
    r = (x + x) * q - (T)k * p;                                \
    p = q;                                                     \
    q = r;                                                     \
  }                                                            \
  return r;

/* Probabilists' Hermite: He_{k+1} = x He_k - k He_{k-1} */
#define HERM_HE(T, x, n)                                       \
  if (n < 0) return 0;                                         \
  if (n == 0) return 1;                                        \
  if (n == 1) return x;                                        \
  if (n > (sizeof(T) == sizeof(float) ? 128 : 512)) return NAN; \
  T p = 1, q = x, r = 0;                                       \
  for (int64_t k = 1; k < n; k++) {                            \
    r = x * q - (T)k * p;                                      \
    p = q;                                                     \
    q = r;                                                     \
  }                                                            \
  return r;

#define LAGUERRE(T, x, n)                                            \
  if (n < 0) return 0;                                               \
  if (fabs(x) == 0) return 1;                                        \
  if (n == 0) return 1;                                              \
  if (n == 1) return 1 - x;                                          \
  T p = 1, q = 1 - x, r = q;                                         \
  for (int64_t k = 1; k < n && !isnan(q); k++) {                     \
    r = (((T)(k + k) + (1 - x)) * q - (T)k * p) / (T)(k + 1);        \
    p = q;                                                           \
    q = r;                                                           \
  }                                                                  \
  return r;

#define LEGENDRE(T, x, n)                                            \
  if (n < 0) return 0;                                               \
  if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? (T)1 : (T)-1;     \
  if (n == 0) return 1;                                              \
  if (n == 1) return x;                                              \
  T p = 1, q = x, r = q;                                             \
  for (int64_t k = 1; k < n && !isnan(q); k++) {                     \
    r = ((T)(k + k + 1) * x * q - (T)k * p) / (T)(k + 1);            \
    p = q;                                                           \
    q = r;                                                           \
  }                                                                  \
  return r;

#define DEFINE_POLY(NAME, BODY)                                             \
  double hpu_sf_##NAME(double x, double nd) { int64_t n = degree(nd); BODY(double, x, n) } \
  float hpu_sf_##NAME##f(float x, float nd) { int64_t n = degree(nd); BODY(float, x, n) }

DEFINE_POLY(chebyshev_t, CHEB_T)
DEFINE_POLY(chebyshev_u, CHEB_U)
DEFINE_POLY(chebyshev_v, CHEB_V)
DEFINE_POLY(chebyshev_w, CHEB_W)
DEFINE_POLY(shifted_chebyshev_t, SCHEB_T)
DEFINE_POLY(shifted_chebyshev_u, SCHEB_U)
DEFINE_POLY(shifted_chebyshev_v, SCHEB_V)
DEFINE_POLY(shifted_chebyshev_w, SCHEB_W)
DEFINE_POLY(hermite_h, HERM_H)
DEFINE_POLY(hermite_he, HERM_HE)
DEFINE_POLY(laguerre_l, LAGUERRE)
DEFINE_POLY(legendre_p, LEGENDRE)
