/* hpu/clock.h's time base. */
#include "hpu/clock.h"

#include <time.h>

uint64_t hpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
