/* The float64 linalg kernels (linalg_tmpl.h with dgetrf_, ...). */
#define T double
#define P(x) d##x
#define CBLAS(x) cblas_d##x
#define FN(x) x##_f64
#include "kernels/linalg_tmpl.h"
