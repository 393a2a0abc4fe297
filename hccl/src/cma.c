/* Cross-memory attach between the local ranks of a host: a rank reads its
 * peers' host buffers and writes their outputs with process_vm_readv and
 * process_vm_writev (one kernel copy each way), so host-memory collectives
 * need no staging through the shared segment. It needs the right to ptrace
 * the peers (same user, and no Yama or seccomp restriction), so each
 * communicator probes it once: every rank reads a known word out of every
 * local peer; the algorithms use CMA only if every rank's probe succeeded
 * (published per call).
 *
 * Off by default (HCCL_CMA=1 turns it on): on the 2-core machines measured,
 * the kernel's page pinning (a page-table walk per 4 KB page, both ways)
 * costs more than the staged path, whose 1 MB slots stay in cache between
 * the copy in, the reduction and the gather (docs/PERFORMANCE.md). It
 * remains for machines where that balance differs (fewer barriers per
 * call). */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "internal.h"

const uint64_t hccl_cma_probe_word = 0x48434d4150524f42ull;  /* "HCMAPROB" */

bool hccl_cma_usable(hcclComm_t comm) {
  if (comm->cma_state) return comm->cma_state > 0;
  comm->cma_state = -1;
  if (!comm->cma_env) return false;
  for (int i = 0; i < comm->local_n; i++) {
    if (i == comm->local) continue;
    const hccl_shm_ctrl_t *c = &comm->shm.ctrl[i];
    uint64_t got = 0;
    struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)c->probe_va, sizeof got};
    if (!c->probe_va || process_vm_readv(c->pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof got ||
        got != hccl_cma_probe_word) {
      hccl_debug("rank %d: CMA to rank %d unavailable (%s): host buffers are staged", comm->rank,
                 comm->local_ranks[i], got ? "bad probe" : strerror(errno));
      return false;
    }
  }
  comm->cma_state = 1;
  return true;
}

static hcclResult_t cma_fail(hcclComm_t comm, int li, const char *what, ssize_t got, size_t n) {
  return hccl_err(got < 0 && errno == ESRCH ? hcclRemoteError : hcclSystemError,
                  "rank %d: %s rank %d's memory (%zu bytes): %s", comm->rank, what, comm->local_ranks[li], n,
                  got < 0 ? strerror(errno) : "short transfer");
}

hcclResult_t hccl_cma_read(hcclComm_t comm, int li, void *dst, uint64_t src_va, size_t n) {
  while (n) {
    struct iovec l = {dst, n}, r = {(void *)(uintptr_t)src_va, n};
    ssize_t got = process_vm_readv(comm->shm.ctrl[li].pid, &l, 1, &r, 1, 0);
    if (got <= 0) return cma_fail(comm, li, "reading", got, n);
    dst = (char *)dst + got;
    src_va += (uint64_t)got;
    n -= (size_t)got;
  }
  return hcclSuccess;
}

hcclResult_t hccl_cma_write(hcclComm_t comm, int li, uint64_t dst_va, const void *src, size_t n) {
  while (n) {
    struct iovec l = {(void *)src, n}, r = {(void *)(uintptr_t)dst_va, n};
    ssize_t got = process_vm_writev(comm->shm.ctrl[li].pid, &l, 1, &r, 1, 0);
    if (got <= 0) return cma_fail(comm, li, "writing", got, n);
    src = (const char *)src + got;
    dst_va += (uint64_t)got;
    n -= (size_t)got;
  }
  return hcclSuccess;
}
