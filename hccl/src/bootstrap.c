/* Bootstrap: the unique id names a root listener; every rank sends it its
 * identity (rank, host, pid, listening address) and gets back everyone's.
 * Each message is checked for magic, version and size: a foreign or
 * malformed peer gets an error reply and is dropped, the job goes on. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "runtime/hash.h"
#include "wait_policy.h"

static uint64_t random_u64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint64_t)hccl_now_ns() ^ ((uint64_t)getpid() << 32);
  return v;
}

/* Ranks that share /dev/shm and a network: same hostname, boot and network
 * namespace. HCCL_HOST_ID overrides (tests force the TCP path with it). */
void hccl_host_identity(uint64_t *hash, char *text, size_t len) {
  const char *over = getenv("HCCL_HOST_ID");
  if (over && *over) {
    snprintf(text, len, "id:%s", over);
  } else {
    char host[64] = "?", boot[40] = "?";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
      if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
      fclose(f);
      boot[strcspn(boot, "\n")] = 0;
    }
    struct stat st;
    unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
    snprintf(text, len, "%s/%s/%llu", host, boot, netns);
  }
  *hash = hpu_fnv1a(HPU_FNV1A_BASIS, text, strlen(text));
}

/* ---------------- root ---------------- */

typedef struct root_args {
  int lfd;
  uint64_t nonce;
  int64_t timeout_ms;
} root_args_t;

static void reply_error(int fd, hcclResult_t r, const char *msg, int64_t deadline) {
  hccl_boot_reply_t rep;
  memset(&rep, 0, sizeof rep);
  rep.magic = HCCL_MAGIC;
  rep.version = HCCL_PROTO_VERSION;
  rep.status = r;
  snprintf(rep.msg, sizeof rep.msg, "%s", msg);
  hccl_sock_send_all(fd, &rep, sizeof rep, deadline, NULL);
}

static void *root_main(void *p) {
  root_args_t a = *(root_args_t *)p;
  free(p);
  int64_t deadline = hccl_now_ns() + a.timeout_ms * 1000000;
  int nranks = -1, arrived = 0;
  int *fds = NULL;
  hccl_rank_info_t *infos = NULL;
  char msg[160];
  uint64_t session = random_u64();

  while (nranks < 0 || arrived < nranks) {
    int fd;
    if (hccl_sock_accept(a.lfd, deadline, &fd) != hcclSuccess) {
      snprintf(msg, sizeof msg, "bootstrap timed out after %lld ms: %d of %d ranks arrived",
               (long long)a.timeout_ms, arrived, nranks);
      hccl_debug("root: %s", msg);
      for (int i = 0; fds && i < nranks; i++)
        if (fds[i] >= 0) { reply_error(fds[i], hcclRemoteError, msg, hccl_now_ns() + HCCL_REPLY_TIMEOUT_NS); close(fds[i]); }
      goto out;
    }
    /* A client gets a few seconds to say who it is. */
    int64_t dl = hccl_now_ns() + HCCL_HELLO_TIMEOUT_NS;
    if (dl > deadline) dl = deadline;
    hccl_rank_info_t in;
    memset(&in, 0, sizeof in);
    const size_t head = offsetof(hccl_rank_info_t, rank);
    if (hccl_sock_recv_all(fd, &in, head, dl, NULL) != hcclSuccess) { close(fd); continue; }
    const char *why = NULL;
    if (in.magic != HCCL_MAGIC) why = "bad magic: not an hccl peer";
    else if (in.version != HCCL_PROTO_VERSION) why = "protocol version mismatch";
    else if (in.size != sizeof in) why = "rank info size mismatch";
    else if (hccl_sock_recv_all(fd, (char *)&in + head, sizeof in - head, dl, NULL) != hcclSuccess) { close(fd); continue; }
    else if (in.nonce != a.nonce) why = "unique id mismatch (another job)";
    else if (in.nranks <= 0 || in.nranks > HCCL_MAX_RANKS) why = "bad nranks";
    else if (nranks >= 0 && in.nranks != nranks) why = "nranks differs between ranks";
    else if (in.rank < 0 || in.rank >= in.nranks) why = "rank out of range";
    if (!why && nranks < 0) {
      nranks = in.nranks;
      fds = malloc(sizeof(int) * (size_t)nranks);
      infos = calloc((size_t)nranks, sizeof *infos);
      if (!fds || !infos) { close(fd); goto out; }
      for (int i = 0; i < nranks; i++) fds[i] = -1;
    }
    if (!why && fds[in.rank] >= 0) why = "duplicate rank";
    if (why) {
      hccl_debug("root: refused a peer: %s", why);
      reply_error(fd, hcclInvalidUsage, why, hccl_now_ns() + HCCL_REPLY_TIMEOUT_NS);
      close(fd);
      continue;
    }
    in.host_id[sizeof in.host_id - 1] = 0;
    infos[in.rank] = in;
    fds[in.rank] = fd;
    arrived++;
  }
  hccl_boot_reply_t rep;
  memset(&rep, 0, sizeof rep);
  rep.magic = HCCL_MAGIC;
  rep.version = HCCL_PROTO_VERSION;
  rep.status = hcclSuccess;
  rep.nranks = nranks;
  rep.session = session;
  rep.info_size = sizeof(hccl_rank_info_t);
  for (int i = 0; i < nranks; i++) {
    if (hccl_sock_send_all(fds[i], &rep, sizeof rep, deadline, NULL) == hcclSuccess)
      hccl_sock_send_all(fds[i], infos, sizeof(*infos) * (size_t)nranks, deadline, NULL);
    close(fds[i]);
  }
out:
  close(a.lfd);
  free(fds);
  free(infos);
  return NULL;
}

hcclResult_t hccl_bootstrap_start_root(const struct sockaddr_in *addr, uint64_t nonce, int64_t timeout_ms,
                                       struct sockaddr_in *bound) {
  int lfd;
  hcclResult_t r = hccl_sock_listen(addr, &lfd, bound);
  if (r != hcclSuccess) return r;
  root_args_t *a = malloc(sizeof *a);
  if (!a) { close(lfd); return hccl_err(hcclSystemError, "out of memory"); }
  a->lfd = lfd;
  a->nonce = nonce;
  a->timeout_ms = timeout_ms;
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &at, root_main, a);
  pthread_attr_destroy(&at);
  if (e) { close(lfd); free(a); return hccl_err(hcclSystemError, "pthread_create: %s", strerror(e)); }
  return hcclSuccess;
}

/* A fresh id whose root listens on addr (port chosen by the system): used
 * by split, which must ignore HCCL_COMM_ID. */
hcclResult_t hccl_make_unique_id(const struct sockaddr_in *addr, int64_t timeout_ms, hcclUniqueId *out) {
  hccl_id_t id;
  memset(&id, 0, sizeof id);
  id.magic = HCCL_ID_MAGIC;
  id.version = HCCL_PROTO_VERSION;
  id.nonce = random_u64();
  struct sockaddr_in a = *addr;
  a.sin_port = 0;
  hcclResult_t r = hccl_bootstrap_start_root(&a, id.nonce, timeout_ms, &id.root);
  if (r != hcclSuccess) return r;
  memset(out, 0, sizeof *out);
  memcpy(out->internal, &id, sizeof id);
  return hcclSuccess;
}

hcclResult_t hcclGetUniqueId(hcclUniqueId *out) {
  if (!out) return hccl_err(hcclInvalidArgument, "hcclGetUniqueId: NULL argument");
  hccl_id_t id;
  memset(&id, 0, sizeof id);
  id.magic = HCCL_ID_MAGIC;
  id.version = HCCL_PROTO_VERSION;
  const char *env = getenv("HCCL_COMM_ID");
  hcclResult_t r;
  if (env && *env) {
    /* Every rank computes the same id; rank 0's init starts the root. */
    if ((r = hccl_sock_parse(env, &id.root)) != hcclSuccess) return r;
    id.flags = HCCL_ID_START_ROOT;
    id.nonce = hpu_fnv1a(HPU_FNV1A_BASIS, env, strlen(env));
  } else {
    struct sockaddr_in a;
    if ((r = hccl_sock_pick_addr(&a)) != hcclSuccess) return r;
    id.nonce = random_u64();
    int64_t timeout_ms;
    if ((r = hccl_default_timeout_ms(&timeout_ms)) != hcclSuccess) return r;
    if ((r = hccl_bootstrap_start_root(&a, id.nonce, timeout_ms, &id.root)) != hcclSuccess) return r;
  }
  memset(out, 0, sizeof *out);
  memcpy(out->internal, &id, sizeof id);
  return hcclSuccess;
}

hcclResult_t hccl_bootstrap_exchange(const hccl_id_t *id, int nranks, int rank, int device, int64_t timeout_ms,
                                     int *listen_fd, uint64_t *session, hccl_rank_info_t *infos) {
  int64_t deadline = hccl_now_ns() + timeout_ms * 1000000;
  hcclResult_t r;
  char ab[64];
  if (id->flags & HCCL_ID_START_ROOT && rank == 0) {
    if ((r = hccl_bootstrap_start_root(&id->root, id->nonce, timeout_ms, NULL)) != hcclSuccess) return r;
  }
  int fd = -1;
  if ((r = hccl_sock_connect(&id->root, deadline, &fd)) != hcclSuccess)
    return hccl_err(r, "bootstrap: cannot reach the root at %s: %s", hccl_addr_str(&id->root, ab, sizeof ab),
                    hccl_thread_error());
  /* Listen on the address this host uses to reach the root: the root's
   * network can reach it. */
  struct sockaddr_in mine;
  socklen_t l = sizeof mine;
  getsockname(fd, (struct sockaddr *)&mine, &l);
  mine.sin_port = 0;
  hccl_rank_info_t me;
  memset(&me, 0, sizeof me);
  if ((r = hccl_sock_listen(&mine, listen_fd, &me.listen_addr)) != hcclSuccess) { close(fd); return r; }
  me.magic = HCCL_MAGIC;
  me.version = HCCL_PROTO_VERSION;
  me.size = sizeof me;
  me.rank = rank;
  me.nranks = nranks;
  me.pid = (int32_t)getpid();
  me.device = device;
  me.nonce = id->nonce;
  hccl_host_identity(&me.host_hash, me.host_id, sizeof me.host_id);
  hccl_boot_reply_t rep;
  if ((r = hccl_sock_send_all(fd, &me, sizeof me, deadline, NULL)) != hcclSuccess) goto fail;
  if ((r = hccl_sock_recv_all(fd, &rep, sizeof rep, deadline, NULL)) != hcclSuccess) {
    hccl_err(r, "bootstrap: no answer from the root at %s within %lld ms (%s)",
             hccl_addr_str(&id->root, ab, sizeof ab), (long long)timeout_ms, hccl_thread_error());
    goto fail;
  }
  if (rep.magic != HCCL_MAGIC || rep.version != HCCL_PROTO_VERSION) {
    r = hccl_err(hcclRemoteError, "bootstrap: the root speaks another protocol (magic %#x version %u)", rep.magic,
                 rep.version);
    goto fail;
  }
  rep.msg[sizeof rep.msg - 1] = 0;
  if (rep.status != hcclSuccess) {
    r = hccl_err(rep.status > 0 && rep.status < hcclNumResults ? (hcclResult_t)rep.status : hcclRemoteError,
                 "bootstrap refused: %s", rep.msg);
    goto fail;
  }
  if (rep.nranks != nranks || rep.info_size != sizeof(hccl_rank_info_t)) {
    r = hccl_err(hcclRemoteError, "bootstrap: malformed reply (nranks %d, info size %u)", rep.nranks, rep.info_size);
    goto fail;
  }
  if ((r = hccl_sock_recv_all(fd, infos, sizeof(*infos) * (size_t)nranks, deadline, NULL)) != hcclSuccess) goto fail;
  for (int i = 0; i < nranks; i++) {
    if (infos[i].magic != HCCL_MAGIC || infos[i].rank != i || infos[i].nonce != id->nonce) {
      r = hccl_err(hcclRemoteError, "bootstrap: malformed rank table entry %d", i);
      goto fail;
    }
    infos[i].host_id[sizeof infos[i].host_id - 1] = 0;
  }
  *session = rep.session;
  close(fd);
  return hcclSuccess;
fail:
  close(fd);
  close(*listen_fd);
  *listen_fd = -1;
  return r;
}
