/* This machine's memory copy bandwidth, for HCCL's bandwidth bound: memcpy
 * of a 256 MB buffer (far beyond the caches) by 1 thread and by one thread
 * per core; prints bytes copied per second (each byte copied is one read and
 * one write of memory traffic). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t per;
static char *src, *dst;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
  size_t i = (size_t)arg;
  for (int k = 0; k < 4; k++) memcpy(dst + i * per, src + i * per, per);
  return NULL;
}

static double run(int threads, size_t total) {
  per = total / threads;
  pthread_t t[64];
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(size_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double gbs = 4.0 * total / (now() - t0) / 1e9;
    if (gbs > best) best = gbs;
  }
  return best;
}

int main(void) {
  size_t total = 256u << 20;
  src = malloc(total);
  dst = malloc(total);
  memset(src, 1, total);
  memset(dst, 2, total);
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  int cores = CPU_COUNT(&set);
  if (cores > 64) cores = 64;
  printf("copy_bw_1thread_GBps %.2f\n", run(1, total));
  printf("copy_bw_%dthreads_GBps %.2f\n", cores, run(cores, total));
  return 0;
}
