/* Point-to-point engine: a set of sends and receives progressed together
 * (a group may hold both directions to the same peer; nothing waits for one
 * transfer while another could move). Local peers: a one-way mailbox of two
 * slots per ordered pair in the shared segment, with chunk, message size and
 * sequence recorded per slot so a size mismatch is an error on both sides.
 * Remote peers: a 24-byte header (magic, sequence, size) and the payload on
 * the pair's TCP connection. Operations to the same peer in the same
 * direction complete in order. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"
#include "wait_policy.h"

typedef struct p2p_set {
  hccl_p2p_t *ops;
  int n;
} p2p_set_t;

static bool is_local(hcclComm_t comm, int peer) { return comm->local_of[peer] >= 0; }

/* The op is the first unfinished one in its (peer, direction). */
static bool is_head(const p2p_set_t *s, int i) {
  for (int j = 0; j < i; j++)
    if (s->ops[j].peer == s->ops[i].peer && s->ops[j].is_send == s->ops[i].is_send && s->ops[j].stage != 2)
      return false;
  return true;
}

static void start(hcclComm_t comm, hccl_p2p_t *o) {
  if (o->started) return;
  o->started = true;
  o->seq = o->is_send ? comm->send_seq[o->peer]++ : comm->recv_seq[o->peer]++;
}

static hcclResult_t progress_local(hcclComm_t comm, hccl_p2p_t *o, bool *moved) {
  const int L = comm->local_n, me = comm->local, j = comm->local_of[o->peer];
  const size_t cap = comm->shm.mbox_bytes;
  start(comm, o);
  if (o->is_send) {
    hccl_shm_mbox_t *mb = hccl_mbox(&comm->shm, L, me, j);
    while (o->done < o->bytes) {
      unsigned sent = atomic_load_explicit(&mb->sent, memory_order_relaxed);
      unsigned acked = atomic_load_explicit(&mb->acked, memory_order_acquire);
      if (sent - acked >= 2) return hcclSuccess;
      int s = (int)(sent & 1);
      size_t n = o->bytes - o->done < cap ? o->bytes - o->done : cap;
      hccl_copy(hccl_mbox_slot(&comm->shm, L, me, j, s), o->buf + o->done, n);
      mb->chunk_bytes[s] = n;
      mb->msg_bytes[s] = o->bytes;
      mb->msg_seq[s] = o->seq;
      atomic_store_explicit(&mb->sent, sent + 1, memory_order_seq_cst);
      hccl_wake(comm, j);
      o->done += n;
      *moved = true;
    }
  } else {
    hccl_shm_mbox_t *mb = hccl_mbox(&comm->shm, L, j, me);
    while (o->done < o->bytes) {
      unsigned sent = atomic_load_explicit(&mb->sent, memory_order_acquire);
      unsigned acked = atomic_load_explicit(&mb->acked, memory_order_relaxed);
      if (sent == acked) return hcclSuccess;
      int s = (int)(acked & 1);
      size_t n = o->bytes - o->done < cap ? o->bytes - o->done : cap;
      if (mb->msg_bytes[s] != o->bytes || mb->msg_seq[s] != o->seq || mb->chunk_bytes[s] != n)
        return hccl_err(hcclInvalidUsage,
                        "rank %d expected a message #%llu of %zu bytes from rank %d, which sent #%llu of %llu bytes",
                        comm->rank, (unsigned long long)o->seq, o->bytes, o->peer,
                        (unsigned long long)mb->msg_seq[s], (unsigned long long)mb->msg_bytes[s]);
      hccl_copy(o->buf + o->done, hccl_mbox_slot(&comm->shm, L, j, me, s), n);
      atomic_store_explicit(&mb->acked, acked + 1, memory_order_seq_cst);
      hccl_wake(comm, j);
      o->done += n;
      *moved = true;
    }
  }
  o->stage = 2;
  return hcclSuccess;
}

static hcclResult_t io_err(hcclComm_t comm, hccl_p2p_t *o, ssize_t k) {
  if (k == 0) return hccl_err(hcclRemoteError, "rank %d: connection to rank %d closed (peer died or failed)", comm->rank, o->peer);
  return hccl_err(hcclRemoteError, "rank %d: connection to rank %d: %s", comm->rank, o->peer, strerror(errno));
}

static hcclResult_t progress_remote(hcclComm_t comm, hccl_p2p_t *o, bool *moved) {
  int fd = comm->sock[o->peer];
  if (fd < 0) return hccl_err(hcclInternalError, "no connection to rank %d", o->peer);
  if (!o->started) {
    start(comm, o);
    if (o->is_send) {
      uint32_t magic = HCCL_MAGIC, pad = 0;
      uint64_t seq = o->seq, bytes = o->bytes;
      memcpy(o->hdr, &magic, 4);
      memcpy(o->hdr + 4, &pad, 4);
      memcpy(o->hdr + 8, &seq, 8);
      memcpy(o->hdr + 16, &bytes, 8);
    }
  }
  for (;;) {
    if (o->stage == 0) {
      ssize_t k = o->is_send ? send(fd, o->hdr + o->hdr_done, 24 - o->hdr_done, MSG_NOSIGNAL | MSG_DONTWAIT)
                             : recv(fd, o->hdr + o->hdr_done, 24 - o->hdr_done, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return hcclSuccess;
      if (k <= 0) return io_err(comm, o, k);
      *moved = true;
      o->hdr_done += (size_t)k;
      if (o->hdr_done < 24) continue;
      if (!o->is_send) {
        uint32_t magic;
        uint64_t seq, bytes;
        memcpy(&magic, o->hdr, 4);
        memcpy(&seq, o->hdr + 8, 8);
        memcpy(&bytes, o->hdr + 16, 8);
        if (magic != HCCL_MAGIC)
          return hccl_err(hcclRemoteError, "rank %d: malformed message from rank %d (bad magic %#x)", comm->rank, o->peer, magic);
        if (seq != o->seq || bytes != o->bytes)
          return hccl_err(hcclInvalidUsage, "rank %d expected message #%llu of %zu bytes from rank %d, got #%llu of %llu bytes",
                          comm->rank, (unsigned long long)o->seq, o->bytes, o->peer, (unsigned long long)seq,
                          (unsigned long long)bytes);
      }
      o->stage = 1;
    }
    if (o->stage == 1) {
      if (o->done == o->bytes) { o->stage = 2; return hcclSuccess; }
      ssize_t k = o->is_send ? send(fd, o->buf + o->done, o->bytes - o->done, MSG_NOSIGNAL | MSG_DONTWAIT)
                             : recv(fd, o->buf + o->done, o->bytes - o->done, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return hcclSuccess;
      if (k <= 0) return io_err(comm, o, k);
      *moved = true;
      o->done += (size_t)k;
      continue;
    }
    return hcclSuccess;
  }
}

static bool local_ready(hcclComm_t comm, void *arg) {
  p2p_set_t *s = arg;
  const int L = comm->local_n, me = comm->local;
  for (int i = 0; i < s->n; i++) {
    hccl_p2p_t *o = &s->ops[i];
    if (o->stage == 2 || !is_local(comm, o->peer) || !is_head(s, i)) continue;
    int j = comm->local_of[o->peer];
    if (o->is_send) {
      hccl_shm_mbox_t *mb = hccl_mbox(&comm->shm, L, me, j);
      if (atomic_load(&mb->sent) - atomic_load(&mb->acked) < 2) return true;
    } else {
      hccl_shm_mbox_t *mb = hccl_mbox(&comm->shm, L, j, me);
      if (atomic_load(&mb->sent) != atomic_load(&mb->acked)) return true;
    }
  }
  return false;
}

hcclResult_t hccl_p2p_run(hcclComm_t comm, hccl_p2p_t *ops, int n) {
  p2p_set_t set = {ops, n};
  struct pollfd *pfd = NULL;
  int64_t deadline = hccl_comm_deadline(comm);
  hcclResult_t r = hcclSuccess;
  int idle = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].bytes == 0) ops[i].stage = 2;   /* zero-size messages carry nothing */
  for (;;) {
    bool moved = false, pending = false, remote = false, local = false;
    for (int i = 0; i < n; i++) {
      hccl_p2p_t *o = &ops[i];
      if (o->stage == 2) continue;
      pending = true;
      if (!is_head(&set, i)) continue;
      bool loc = is_local(comm, o->peer);
      r = loc ? progress_local(comm, o, &moved) : progress_remote(comm, o, &moved);
      if (r != hcclSuccess) goto out;
      if (o->stage != 2) { if (loc) local = true; else remote = true; }
    }
    if (!pending) break;
    if (moved) { deadline = hccl_comm_deadline(comm); idle = 0; continue; }
    if (!remote) {
      if ((r = hccl_wait(comm, local_ready, &set, "send/recv")) != hcclSuccess) goto out;
      deadline = hccl_comm_deadline(comm);
      continue;
    }
    /* Sockets: poll them (briefly if mailboxes are also in play). */
    if (!pfd && !(pfd = calloc((size_t)n, sizeof *pfd))) { r = hccl_err(hcclSystemError, "out of memory"); goto out; }
    int np = 0;
    for (int i = 0; i < n; i++) {
      hccl_p2p_t *o = &ops[i];
      if (o->stage == 2 || is_local(comm, o->peer) || !is_head(&set, i)) continue;
      pfd[np].fd = comm->sock[o->peer];
      pfd[np].events = o->is_send ? POLLOUT : POLLIN;
      pfd[np].revents = 0;
      np++;
    }
    if ((r = hccl_check_alive(comm, deadline, "send/recv over TCP")) != hcclSuccess) goto out;
    if (local && idle < HCCL_P2P_MBOX_SPINS) { idle++; continue; }   /* spin over the mailboxes */
    poll(pfd, (nfds_t)np, local ? HCCL_P2P_POLL_MS_WITH_MBOX : HCCL_P2P_POLL_MS);
  }
out:
  free(pfd);
  return r;
}
