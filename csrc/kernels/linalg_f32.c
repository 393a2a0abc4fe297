/* The float32 linalg kernels (linalg_tmpl.h with sgetrf_, ...). */
#define T float
#define P(x) s##x
#define CBLAS(x) cblas_s##x
#define FN(x) x##_f32
#include "kernels/linalg_tmpl.h"
