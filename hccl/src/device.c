/* Device buffers. A device pointer is a host address inside a card's arena,
 * so algorithms read and write it directly; what differs is ordering: a
 * collective on the NULL stream first waits for the cards that own its
 * buffers (CUDA's legacy default stream), one on a card's stream runs in
 * that stream's order (enqueue.c). */
#include <sys/mman.h>
#include <errno.h>
#include <string.h>

#include "hpu/device.h"
#include "hpu/memory.h"
#include "internal.h"

hcclResult_t hccl_sync_device_buffers(const void *a, const void *b) {
  const void *ptrs[2] = {a, b};
  int done = -1;
  for (int i = 0; i < 2; i++) {
    if (!ptrs[i]) continue;
    int dev = -1;
    if (hpu_pointer_get_device(ptrs[i], &dev) != HPU_SUCCESS || dev < 0 || dev == done) continue;
    if (hpu_device_synchronize(dev) != HPU_SUCCESS)
      return hccl_err(hcclUnhandledCudaError, "card %d failed before the collective: %s", dev, hpu_last_error());
    done = dev;
  }
  return hcclSuccess;
}

/* Allocations remember their size in a header page. */
hcclResult_t hcclMemAlloc(void **ptr, size_t size) {
  if (!ptr) return hccl_err(hcclInvalidArgument, "hcclMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) return hcclSuccess;
  size_t total = size + 4096;
  char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return hccl_err(hcclSystemError, "hcclMemAlloc(%zu): %s", size, strerror(errno));
  memcpy(p, &total, sizeof total);
  *ptr = p + 4096;
  return hcclSuccess;
}

hcclResult_t hcclMemFree(void *ptr) {
  if (!ptr) return hcclSuccess;
  char *p = (char *)ptr - 4096;
  size_t total;
  memcpy(&total, p, sizeof total);
  munmap(p, total);
  return hcclSuccess;
}
