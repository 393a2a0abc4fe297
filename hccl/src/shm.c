/* The host's shared segment of a communicator: control words, mailboxes and
 * staging slots. The first local rank creates it (O_EXCL, mode 0600, a
 * random name from the bootstrap session); the last rank to map it unlinks
 * it, so /dev/shm holds it only during initialisation, and any failure on
 * the way unlinks it too. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "wait_policy.h"

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static bool pid_alive(hcclComm_t comm, int li) {
  if (!comm->pidfd || comm->pidfd[li] < 0) return true;
  struct pollfd p = {comm->pidfd[li], POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

hcclResult_t hccl_shm_setup(hcclComm_t comm) {
  hccl_shm_t *s = &comm->shm;
  const int L = comm->local_n;
  /* As init read them (HCCL_SHM_SLOT_BYTES, HCCL_SHM_MBOX_BYTES). */
  size_t slot = align_up(s->slot_bytes, 4096);
  size_t mbox = align_up(s->mbox_bytes, 4096);
  hcclResult_t r = hcclSuccess;
  size_t ctrl_off = align_up(sizeof(hccl_shm_header_t), 4096);
  size_t mbox_off = align_up(ctrl_off + sizeof(hccl_shm_ctrl_t) * (size_t)L, 4096);
  size_t slot_off = align_up(mbox_off + sizeof(hccl_shm_mbox_t) * (size_t)L * (size_t)L, 4096);
  size_t mdat_off = slot_off + (size_t)L * 2 * slot;
  size_t total = mdat_off + (size_t)L * (size_t)L * 2 * mbox;
  snprintf(s->name, sizeof s->name, "/hccl-%016llx-%d", (unsigned long long)comm->session, comm->host);
  int64_t deadline = hccl_comm_deadline(comm);
  int fd = -1;
  void *base = MAP_FAILED;

  if (comm->local == 0) {
    fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) { r = hccl_err(hcclSystemError, "shm_open(%s): %s", s->name, strerror(errno)); goto fail; }
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)total) != 0) {
      r = hccl_err(hcclSystemError, "sizing %s to %zu bytes: %s", s->name, total, strerror(errno));
      goto fail;
    }
    base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) { r = hccl_err(hcclSystemError, "mmap %s: %s", s->name, strerror(errno)); goto fail; }
    hccl_shm_header_t *h = base;
    h->magic = HCCL_MAGIC;
    h->version = HCCL_PROTO_VERSION;
    h->session = comm->session;
    h->total_bytes = total;
    h->local_n = L;
    h->slot_bytes = slot;
    h->mbox_bytes = mbox;
    h->ctrl_off = ctrl_off;
    h->mbox_off = mbox_off;
    h->slot_off = slot_off;
    h->mbox_data_off = mdat_off;
    atomic_store(&h->attached, 0);
    atomic_store(&h->abort, 0);
    atomic_store(&h->ready, 1);
  } else {
    int leader = comm->local_ranks[0];
    int delay = HCCL_SHM_OPEN_RETRY_FIRST_US;
    for (;;) {
      fd = shm_open(s->name, O_RDWR | O_CLOEXEC, 0);
      if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) != 0) { r = hccl_err(hcclSystemError, "fstat %s: %s", s->name, strerror(errno)); goto fail; }
        if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
          r = hccl_err(hcclSystemError, "%s is not a private segment of this user: refusing it", s->name);
          goto fail;
        }
        if ((size_t)st.st_size == total) {
          base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (base == MAP_FAILED) { r = hccl_err(hcclSystemError, "mmap %s: %s", s->name, strerror(errno)); goto fail; }
          if (atomic_load(&((hccl_shm_header_t *)base)->ready)) break;
          munmap(base, total);
          base = MAP_FAILED;
        } else if ((size_t)st.st_size > total || (st.st_size != 0 && (size_t)st.st_size < total)) {
          r = hccl_err(hcclInvalidUsage, "%s has %lld bytes, expected %zu (HCCL_SHM_* settings differ between ranks?)",
                       s->name, (long long)st.st_size, total);
          goto fail;
        }
        close(fd);
        fd = -1;
      } else if (errno != ENOENT) {
        r = hccl_err(hcclSystemError, "shm_open(%s): %s", s->name, strerror(errno));
        goto fail;
      }
      if (!pid_alive(comm, 0)) { r = hccl_err(hcclRemoteError, "rank %d died during initialisation", leader); goto fail; }
      if (hccl_now_ns() > deadline) {
        r = hccl_err(hcclRemoteError, "timed out waiting for rank %d to create the shared segment", leader);
        goto fail;
      }
      usleep((useconds_t)delay);
      if (delay < HCCL_SHM_RETRY_CAP_US) delay *= 2;
    }
    hccl_shm_header_t *h = base;
    if (h->magic != HCCL_MAGIC || h->version != HCCL_PROTO_VERSION || h->session != comm->session ||
        h->local_n != L || h->total_bytes != total || h->slot_bytes != slot || h->mbox_bytes != mbox) {
      r = hccl_err(hcclInvalidUsage, "shared segment %s has a foreign or mismatched header", s->name);
      goto fail;
    }
  }
  close(fd);
  fd = -1;
  s->hdr = base;
  s->map_bytes = total;
  s->ctrl = (hccl_shm_ctrl_t *)((char *)base + ctrl_off);
  s->mbox = (hccl_shm_mbox_t *)((char *)base + mbox_off);
  s->slots = (char *)base + slot_off;
  s->mbox_data = (char *)base + mdat_off;
  s->slot_bytes = slot;
  s->mbox_bytes = mbox;
  s->ctrl[comm->local].pid = (int32_t)getpid();
  s->ctrl[comm->local].probe_va = (uint64_t)(uintptr_t)&hccl_cma_probe_word;
  /* The last one in removes the name. */
  if (atomic_fetch_add(&s->hdr->attached, 1) + 1 == L) shm_unlink(s->name);
  int delay = HCCL_SHM_ATTACH_RETRY_FIRST_US;
  while (atomic_load(&s->hdr->attached) < L) {
    for (int i = 0; i < L; i++)
      if (!pid_alive(comm, i)) {
        r = hccl_err(hcclRemoteError, "rank %d died during initialisation", comm->local_ranks[i]);
        goto fail_mapped;
      }
    if (hccl_now_ns() > deadline) {
      r = hccl_err(hcclRemoteError, "timed out: %d of %d local ranks mapped the shared segment",
                   atomic_load(&s->hdr->attached), L);
      goto fail_mapped;
    }
    usleep((useconds_t)delay);
    if (delay < HCCL_SHM_RETRY_CAP_US) delay *= 2;
  }
  return hcclSuccess;

fail_mapped:
  atomic_store(&s->hdr->abort, 1 + comm->rank);
  base = s->hdr;
  s->hdr = NULL;
fail:
  if (fd >= 0) close(fd);
  if (base != MAP_FAILED) munmap(base, total);
  shm_unlink(s->name);  /* whoever fails removes the name: nothing stays behind */
  return r;
}

void hccl_shm_teardown(hcclComm_t comm) {
  hccl_shm_t *s = &comm->shm;
  if (s->hdr) munmap(s->hdr, s->map_bytes);
  s->hdr = NULL;
}
