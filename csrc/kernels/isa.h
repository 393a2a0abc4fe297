/* Function attributes for the per-ISA clones of hot loops. The build stays
 * generic x86-64; these clones are picked at run time (hpu_kernels_isa). */
#ifndef HPU_KERNELS_ISA_H
#define HPU_KERNELS_ISA_H

#if defined(__x86_64__) && defined(__GNUC__)
#define HPU_ATTR_generic
#define HPU_ATTR_avx2 __attribute__((target("avx2,fma,bmi2")))
#define HPU_ATTR_avx512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi2,prefer-vector-width=512")))
#define HPU_HAVE_ISA_CLONES 1
#else
#define HPU_ATTR_generic
#define HPU_ATTR_avx2
#define HPU_ATTR_avx512
#define HPU_HAVE_ISA_CLONES 0
#endif

#endif
