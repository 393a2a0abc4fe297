/* The one time base and the one spin-wait pause of the C core and HCCL.
 *
 * Here, beside hpu/env.h, rather than in runtime/, because HCCL uses them
 * too: it links the C core already (device buffers, streams, the
 * environment parser), so a copy of its own would only be a second place
 * to keep right. */
#ifndef HPU_CLOCK_H
#define HPU_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in nanoseconds: spin budgets, deferred queue wakes,
 * event timestamps, compile times, HCCL's deadlines. */
uint64_t hpu_now_ns(void);

/* One pause of a spin-wait loop: tells the CPU we are spinning (frees the
 * sibling hyperthread, avoids the memory-order flush on exit). */
static inline void hpu_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

#ifdef __cplusplus
}
#endif

#endif
