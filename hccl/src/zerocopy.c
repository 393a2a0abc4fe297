/* Zero-copy between the local ranks of a host. A device buffer is a range
 * of its card's arena, a memfd mapped MAP_SHARED (csrc/runtime/arena.c), so
 * a local peer can map the same pages and read or write the buffer in
 * place: no staging through the shared segment. A rank publishes where its
 * buffers live (pid, memfd, inode, offset) in its control block; peers open
 * /proc/PID/fd/FD (a same-user reopen, which needs no ptrace rights) and
 * keep the mapping for the communicator's life. Host memory (malloc) has no
 * such handle: collectives on it keep the staged path.
 *
 * HCCL_ZERO_COPY=0 turns it off (it must be the same on every rank). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hpu/memory.h"
#include "internal.h"

/* This process's arenas: looked up once per card (an arena lives as long
 * as the process). */
#define ZC_CARDS 64
static struct {
  int state;                   /* 0 unknown, 1 known, -1 unusable */
  int fd;
  uint64_t ino;
  char *base;
  size_t bytes;
} own[ZC_CARDS];
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;

static bool own_arena(int dev, int *fd, uint64_t *ino, char **base, size_t *bytes) {
  if (dev < 0 || dev >= ZC_CARDS) return false;
  pthread_mutex_lock(&own_mu);
  if (own[dev].state == 0) {
    int f = -1;
    void *b = NULL;
    size_t n = 0;
    struct stat st;
    own[dev].state = -1;
    if (hpu_memory_arena(dev, &f, &b, &n) == HPU_SUCCESS && f >= 0 && fstat(f, &st) == 0) {
      own[dev] = (typeof(own[dev])){1, f, (uint64_t)st.st_ino, b, n};
    }
  }
  bool ok = own[dev].state == 1;
  if (ok) {
    *fd = own[dev].fd;
    *ino = own[dev].ino;
    *base = own[dev].base;
    *bytes = own[dev].bytes;
  }
  pthread_mutex_unlock(&own_mu);
  return ok;
}

void hccl_zc_describe(hcclComm_t comm, const void *p, size_t bytes, hccl_zc_buf_t *b) {
  memset(b, 0, sizeof *b);
  if (!p || !comm->zero_copy) return;
  int dev = -1, fd;
  uint64_t ino;
  char *base;
  size_t size;
  if (hpu_pointer_get_device(p, &dev) != HPU_SUCCESS || dev < 0) return;
  if (!own_arena(dev, &fd, &ino, &base, &size)) return;
  size_t off = (size_t)((const char *)p - base);
  if ((const char *)p < base || off > size || bytes > size - off) return;
  *b = (hccl_zc_buf_t){1, fd, ino, size, off};
}

bool hccl_zc_all(hcclComm_t comm, int b, bool need_send, bool need_recv, int root_local) {
  for (int i = 0; i < comm->local_n; i++) {
    const hccl_zc_desc_t *d = &comm->shm.ctrl[i].zc[b];
    if (need_send && !d->send.valid) return false;
    if (need_recv && (root_local < 0 || root_local == i) && !d->recv.valid) return false;
  }
  return true;
}

static hcclResult_t map_peer(hcclComm_t comm, int li, const hccl_zc_buf_t *b, hccl_zc_map_t *m) {
  int pid = comm->shm.ctrl[li].pid;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, b->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return hccl_err(hcclSystemError, "zero-copy: opening rank %d's card memory (%s): %s (HCCL_ZERO_COPY=0 disables)",
                    comm->local_ranks[li], path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != b->ino || (uint64_t)st.st_size < b->arena_bytes) {
    close(fd);
    return hccl_err(hcclSystemError, "zero-copy: %s is not rank %d's card memory", path, comm->local_ranks[li]);
  }
  void *base = mmap(NULL, b->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);
  if (base == MAP_FAILED)
    return hccl_err(hcclSystemError, "zero-copy: mapping rank %d's card memory (%llu bytes): %s",
                    comm->local_ranks[li], (unsigned long long)b->arena_bytes, strerror(errno));
  *m = (hccl_zc_map_t){b->fd, b->ino, b->arena_bytes, base};
  return hcclSuccess;
}

/* The descriptor's range [off, off + bytes) must lie in the `size` bytes
 * mapped: the control block is shared memory any local rank (or a bug in
 * one) can write, so its offset is checked before it becomes an address. */
static hcclResult_t in_arena(hcclComm_t comm, int li, const hccl_zc_buf_t *b, size_t bytes, size_t size) {
  if (b->off <= size && bytes <= size - b->off) return hcclSuccess;
  return hccl_err(hcclRemoteError,
                  "zero-copy: rank %d published a buffer at offset %llu of its card memory, %zu bytes of which "
                  "were to be read, but that memory has %zu bytes: refusing to access it (a corrupt or "
                  "foreign control block; HCCL_ZERO_COPY=0 disables zero-copy)",
                  comm->local_ranks[li], (unsigned long long)b->off, bytes, size);
}

hcclResult_t hccl_zc_addr(hcclComm_t comm, int li, const hccl_zc_buf_t *b, size_t bytes, char **out) {
  if (li == comm->local) {
    /* My own buffer: the arena's address in this process. Only arenas
     * hccl_zc_describe already looked up are searched (looking up another
     * card would create its arena). */
    char *base = NULL;
    size_t size = 0;
    pthread_mutex_lock(&own_mu);
    for (int dev = 0; dev < ZC_CARDS && !base; dev++)
      if (own[dev].state == 1 && own[dev].ino == b->ino) {
        base = own[dev].base;
        size = own[dev].bytes;
      }
    pthread_mutex_unlock(&own_mu);
    if (!base) return hccl_err(hcclInternalError, "zero-copy: my own buffer's arena is unknown");
    hcclResult_t r = in_arena(comm, li, b, bytes, size);
    if (r == hcclSuccess) *out = base + b->off;
    return r;
  }
  if (!comm->zc_maps) {
    comm->zc_maps = calloc((size_t)comm->local_n * HCCL_ZC_MAPS, sizeof(hccl_zc_map_t));
    if (!comm->zc_maps) return hccl_err(hcclSystemError, "out of memory");
  }
  hccl_zc_map_t *maps = comm->zc_maps + (size_t)li * HCCL_ZC_MAPS;
  int slot = -1;
  for (int k = 0; k < HCCL_ZC_MAPS; k++) {
    if (maps[k].base && maps[k].ino == b->ino && maps[k].bytes == b->arena_bytes) {
      hcclResult_t r = in_arena(comm, li, b, bytes, maps[k].bytes);
      if (r == hcclSuccess) *out = maps[k].base + b->off;
      return r;
    }
    if (!maps[k].base && slot < 0) slot = k;
  }
  if (slot < 0) {  /* more cards than slots (rare): recycle the first */
    munmap(maps[0].base, maps[0].bytes);
    memset(&maps[0], 0, sizeof maps[0]);
    slot = 0;
  }
  hcclResult_t r = map_peer(comm, li, b, &maps[slot]);
  if (r == hcclSuccess) r = in_arena(comm, li, b, bytes, maps[slot].bytes);
  if (r == hcclSuccess) *out = maps[slot].base + b->off;
  return r;
}

void hccl_zc_teardown(hcclComm_t comm) {
  if (!comm->zc_maps) return;
  for (size_t i = 0; i < (size_t)comm->local_n * HCCL_ZC_MAPS; i++)
    if (comm->zc_maps[i].base) munmap(comm->zc_maps[i].base, comm->zc_maps[i].bytes);
  free(comm->zc_maps);
  comm->zc_maps = NULL;
}

bool hccl_zc_offer_send(hcclComm_t comm, int b, const void *buf, size_t bytes) {
  hccl_zc_desc_t *z = &comm->shm.ctrl[comm->local].zc[b];
  hccl_zc_describe(comm, buf, bytes, &z->send);
  z->send_va = (uint64_t)(uintptr_t)buf;
  z->cma = hccl_cma_usable(comm);
  return z->send.valid || z->cma;
}

void hccl_zc_tally(hcclComm_t comm, int b, int *zc, int *cma, int *any) {
  *zc = *cma = *any = 0;
  for (int k = 0; k < comm->local_n; k++) {
    const hccl_zc_desc_t *z = &comm->shm.ctrl[k].zc[b];
    *zc += z->send.valid;
    *cma += z->cma;
    *any += z->send.valid || z->cma;
  }
}
