/* Internal declarations of HCCL: communicator, shared-memory layout,
 * transports, wait primitives and the operation descriptors. */
#ifndef HCCL_INTERNAL_H
#define HCCL_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hccl.h"

#define HCCL_MAGIC 0x48434331u        /* "HCC1" on the wire and in shm */
#define HCCL_ID_MAGIC 0x4843434c49446964ull
#define HCCL_PROTO_VERSION 4u
#define HCCL_CACHELINE 64
#define HCCL_MAX_RANKS 4096

/* ---- errors (error.c) ---- */
hcclResult_t hccl_err(hcclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hccl_clear_error(void);
const char *hccl_thread_error(void);
int64_t hccl_now_ns(void);
/* Numeric settings through the C core's one parser (hpu/env.h): a bad
 * value is hcclInvalidArgument with a message naming the variable, its
 * value and the allowed range. dflt when unset. */
hcclResult_t hccl_env_int(const char *name, int64_t dflt, int64_t min, int64_t max, int64_t *out);
hcclResult_t hccl_env_size(const char *name, uint64_t dflt, uint64_t min, uint64_t max, uint64_t *out);
hcclResult_t hccl_default_timeout_ms(int64_t *out);
void hccl_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- unique id (bootstrap.c) ---- */
typedef struct hccl_id {
  uint64_t magic;
  uint32_t version;
  uint32_t flags;              /* HCCL_ID_START_ROOT: rank 0's init starts the root */
  struct sockaddr_in root;
  uint64_t nonce;
} hccl_id_t;
#define HCCL_ID_START_ROOT 1u
_Static_assert(sizeof(hccl_id_t) <= HCCL_UNIQUE_ID_BYTES, "unique id too large");

/* What each rank tells the root and the root tells every rank. */
typedef struct hccl_rank_info {
  uint32_t magic;
  uint32_t version;
  uint32_t size;               /* sizeof(hccl_rank_info_t) of the sender */
  int32_t rank;
  int32_t nranks;
  int32_t pid;
  int32_t device;
  int32_t pad;
  uint64_t nonce;              /* the unique id's nonce: a foreign job is refused */
  uint64_t host_hash;
  char host_id[96];
  struct sockaddr_in listen_addr;
} hccl_rank_info_t;

typedef struct hccl_boot_reply {
  uint32_t magic;
  uint32_t version;
  int32_t status;              /* hcclResult_t; nonzero: the text follows in msg */
  int32_t nranks;
  uint64_t session;            /* random, names the shm segment of this comm */
  uint32_t info_size;
  uint32_t pad;
  char msg[160];
} hccl_boot_reply_t;

hcclResult_t hccl_bootstrap_start_root(const struct sockaddr_in *addr, uint64_t nonce,
                                       int64_t timeout_ms, struct sockaddr_in *bound);
hcclResult_t hccl_bootstrap_exchange(const hccl_id_t *id, int nranks, int rank, int device,
                                     int64_t timeout_ms, int *listen_fd, uint64_t *session,
                                     hccl_rank_info_t *infos);
hcclResult_t hccl_make_unique_id(const struct sockaddr_in *addr, int64_t timeout_ms, hcclUniqueId *out);
void hccl_host_identity(uint64_t *hash, char *text, size_t len);

/* ---- sockets (socket.c) ---- */
hcclResult_t hccl_sock_pick_addr(struct sockaddr_in *addr);
hcclResult_t hccl_sock_parse(const char *hostport, struct sockaddr_in *addr);
hcclResult_t hccl_sock_listen(const struct sockaddr_in *addr, int *fd, struct sockaddr_in *bound);
hcclResult_t hccl_sock_connect(const struct sockaddr_in *addr, int64_t deadline_ns, int *fd);
hcclResult_t hccl_sock_accept(int lfd, int64_t deadline_ns, int *fd);
/* Blocking transfers bounded by a deadline; abort_flag (may be NULL) is polled. */
hcclResult_t hccl_sock_send_all(int fd, const void *buf, size_t n, int64_t deadline_ns,
                                const atomic_int *abort_flag);
hcclResult_t hccl_sock_recv_all(int fd, void *buf, size_t n, int64_t deadline_ns,
                                const atomic_int *abort_flag);
void hccl_sock_tune(int fd);
const char *hccl_addr_str(const struct sockaddr_in *a, char *buf, size_t len);

/* ---- shared memory (shm.c) ---- */
typedef struct hccl_op_desc {
  uint32_t kind, dtype, redop, pad;
  int64_t root;
  uint64_t count;
  uint64_t seq;
} hccl_op_desc_t;

/* Zero-copy (zerocopy.c): a buffer inside a card's arena, a memfd that local
 * peers map through /proc/PID/fd/FD. valid is 0 for host memory. */
typedef struct hccl_zc_buf {
  int32_t valid, fd;
  uint64_t ino;                /* the memfd's inode: guards against fd reuse */
  uint64_t arena_bytes, off;
} hccl_zc_buf_t;
typedef struct hccl_zc_desc {
  hccl_zc_buf_t send, recv;
  uint64_t send_va, recv_va;   /* the buffers' addresses in the owner (for CMA) */
  int32_t cma, pad;            /* the owner can read and write every local peer's memory (CMA) */
} hccl_zc_desc_t;

/* Per local rank control block: each field that another rank polls gets its
 * own cache line. */
typedef struct hccl_shm_ctrl {
  _Alignas(HCCL_CACHELINE) atomic_uint step;   /* posts of this rank */
  _Alignas(HCCL_CACHELINE) atomic_uint wake;   /* futex word this rank sleeps on */
  atomic_int sleeping;
  int32_t pid;
  uint64_t probe_va;           /* address of a known word in this process (CMA probe) */
  _Alignas(HCCL_CACHELINE) hccl_op_desc_t desc[2]; /* by round parity */
  hccl_zc_desc_t zc[2];                         /* zero-copy: where this rank's buffers live */
} hccl_shm_ctrl_t;

/* A one-way channel between two local ranks: two slots of mbox_bytes. */
typedef struct hccl_shm_mbox {
  _Alignas(HCCL_CACHELINE) atomic_uint sent;    /* chunks posted by the sender */
  uint64_t chunk_bytes[2];
  uint64_t msg_bytes[2];                        /* total size of the message */
  uint64_t msg_seq[2];
  _Alignas(HCCL_CACHELINE) atomic_uint acked;   /* chunks consumed by the receiver */
} hccl_shm_mbox_t;

typedef struct hccl_shm_header {
  uint32_t magic;
  uint32_t version;
  uint64_t session;
  uint64_t total_bytes;
  int32_t local_n;
  int32_t pad;
  uint64_t slot_bytes, mbox_bytes;
  uint64_t ctrl_off, mbox_off, slot_off, mbox_data_off;
  _Alignas(HCCL_CACHELINE) atomic_int ready;
  atomic_int attached;
  _Alignas(HCCL_CACHELINE) atomic_int abort;    /* 0, or 1 + global rank that failed */
  atomic_int abort_code;                        /* hcclResult_t */
} hccl_shm_header_t;

typedef struct hccl_shm {
  hccl_shm_header_t *hdr;
  size_t map_bytes;
  hccl_shm_ctrl_t *ctrl;
  hccl_shm_mbox_t *mbox;      /* [sender local][receiver local] */
  char *slots;                /* [local][2][slot_bytes] */
  char *mbox_data;            /* [sender][receiver][2][mbox_bytes] */
  size_t slot_bytes, mbox_bytes;
  char name[64];
} hccl_shm_t;

hcclResult_t hccl_shm_setup(hcclComm_t comm);
void hccl_shm_teardown(hcclComm_t comm);
static inline char *hccl_slot(const hccl_shm_t *s, int li, int b) {
  return s->slots + ((size_t)li * 2 + (size_t)b) * s->slot_bytes;
}
static inline hccl_shm_mbox_t *hccl_mbox(const hccl_shm_t *s, int L, int from, int to) {
  return &s->mbox[(size_t)from * L + to];
}
static inline char *hccl_mbox_slot(const hccl_shm_t *s, int L, int from, int to, int b) {
  return s->mbox_data + (((size_t)from * L + to) * 2 + (size_t)b) * s->mbox_bytes;
}

/* ---- communicator (comm.c) ---- */
struct hcclComm {
  uint32_t magic;
  int rank, nranks, device;
  uint64_t session;
  hccl_rank_info_t *info;      /* [nranks] */
  int nhosts, host;            /* host index of this rank */
  int *host_of;                /* [nranks] */
  int *local_of;               /* [nranks]: local index or -1 on another host */
  int *local_ranks;            /* [local_n]: global rank by local index */
  int local_n, local;
  bool uniform;                /* every host has local_n ranks, same local order */
  int **host_ranks;            /* [nhosts][local_n] when uniform */

  hccl_shm_t shm;
  struct hccl_zc_map *zc_maps;
  int cma_state;               /* 0 untested, 1 CMA to every local peer works, -1 not */
  char *cma_tmp;               /* staging blocks of the CMA path */ /* [local_n * HCCL_ZC_MAPS]: peers' arenas mapped here */
  int *pidfd;                  /* [local_n] */
  int listen_fd;
  int *sock;                   /* [nranks], -1 for local peers */
  uint64_t *send_seq, *recv_seq; /* p2p message counters per peer */

  unsigned step;               /* my post count (mirrors ctrl[local].step) */
  unsigned round;              /* staging round, its parity picks the buffer */
  uint64_t op_seq;
  int64_t spin_ns;             /* how long a wait spins before it sleeps */
  /* Settings read from the environment at init (a bad value fails init). */
  bool zero_copy;              /* HCCL_ZERO_COPY (1) */
  bool cma_env;                /* HCCL_CMA (0) */
  uint64_t small_bytes;        /* HCCL_SMALL_BYTES; UINT64_MAX: by local ranks */

  atomic_int aborted;          /* local abort request (hcclCommAbort) */
  atomic_int failed;           /* an operation failed: comm unusable */
  _Atomic int64_t timeout_ms;

  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t issue_ticket, done_ticket;
  int refs;                    /* user + queued tasks */
  hcclResult_t async_error;
  char async_msg[256];
  bool destroying;
};
#define HCCL_COMM_MAGIC 0x434f4d4du

hcclResult_t hccl_comm_check(hcclComm_t comm);
/* Marks the communicator failed on every rank: local peers through the shm
 * abort word, remote ones by shutting the sockets. Keeps the first error. */
void hccl_comm_fail(hcclComm_t comm, hcclResult_t r, const char *msg);
void hccl_comm_unref(hcclComm_t comm);
int64_t hccl_comm_deadline(hcclComm_t comm);

/* ---- waiting (wait.c) ---- */
typedef bool (*hccl_cond_fn)(hcclComm_t comm, void *arg);
/* Spins, then sleeps on this rank's futex; fails on abort, timeout, a dead
 * local peer or a peer's abort. what names the wait in messages. */
hcclResult_t hccl_wait(hcclComm_t comm, hccl_cond_fn cond, void *arg, const char *what);
/* Checks abort/peer state once (for loops that poll sockets). */
hcclResult_t hccl_check_alive(hcclComm_t comm, int64_t deadline, const char *what);
void hccl_post(hcclComm_t comm);             /* step++ and wake local peers */
void hccl_wake(hcclComm_t comm, int li);
void hccl_wake_all(hcclComm_t comm);
hcclResult_t hccl_wait_all_posted(hcclComm_t comm, const char *what); /* every local step >= mine */

/* ---- operations ---- */
enum hccl_kind {
  HCCL_K_ALLREDUCE = 1, HCCL_K_BROADCAST, HCCL_K_REDUCE, HCCL_K_ALLGATHER,
  HCCL_K_REDUCESCATTER, HCCL_K_ALLTOALL, HCCL_K_BARRIER, HCCL_K_SEND, HCCL_K_RECV
};
typedef struct hccl_op {
  int kind;
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  hcclDataType_t dtype;
  hcclRedOp_t redop;
  int root;                    /* root, or peer for send/recv */
} hccl_op_t;

size_t hccl_dtype_size(hcclDataType_t dt);
const char *hccl_kind_name(int kind);
hcclResult_t hccl_submit(hcclComm_t comm, const hccl_op_t *op, hcclStream_t stream);
hcclResult_t hccl_run_ops(hcclComm_t comm, hccl_op_t *ops, int nops);
bool hccl_in_group(void);
hcclResult_t hccl_group_add(hcclComm_t comm, const hccl_op_t *op, hcclStream_t stream);
hcclResult_t hccl_launch(hcclComm_t comm, hccl_op_t *ops, int nops, hcclStream_t stream);

/* Staged rounds (coll_common.c). A round: write my slot[b], post, wait for
 * every local peer's post, read peers' slot[b]. The parity b alternates, so
 * a rank rewrites slot[b] only after the next round's wait proved that every
 * peer finished reading it. The first round of an operation also publishes
 * its descriptor; after the wait, hccl_desc_check compares them (mismatched
 * calls become errors on every rank). */
int hccl_round_next(hcclComm_t comm);
void hccl_desc_publish(hcclComm_t comm, const hccl_op_t *op, int b);
hcclResult_t hccl_desc_check(hcclComm_t comm, int b);
/* Part i of n elements cut in parts pieces, piece starts aligned to align. */
void hccl_slice(size_t n, int parts, int i, size_t align, size_t *off, size_t *len);

/* Intra-host algorithms (shm), one file each. */
hcclResult_t hccl_allreduce(hcclComm_t comm, const hccl_op_t *op);
hcclResult_t hccl_broadcast(hcclComm_t comm, const hccl_op_t *op);
hcclResult_t hccl_reduce(hcclComm_t comm, const hccl_op_t *op);
hcclResult_t hccl_allgather(hcclComm_t comm, const hccl_op_t *op);
hcclResult_t hccl_reducescatter(hcclComm_t comm, const hccl_op_t *op);
hcclResult_t hccl_alltoall(hcclComm_t comm, const hccl_op_t *op);
hcclResult_t hccl_barrier(hcclComm_t comm, const hccl_op_t *op);

/* Point-to-point engine (p2p.c): progresses a set of sends and receives to
 * local (mailbox) and remote (TCP) peers together. */
typedef struct hccl_p2p {
  int is_send;
  int peer;
  char *buf;
  size_t bytes;
  /* progress */
  size_t done;
  int stage;                   /* tcp: 0 header, 1 payload, 2 finished */
  size_t hdr_done;
  unsigned char hdr[24];
  uint64_t seq;
  bool started;
} hccl_p2p_t;
hcclResult_t hccl_p2p_run(hcclComm_t comm, hccl_p2p_t *ops, int n);

/* Across hosts (net.c). */
hcclResult_t hccl_net_setup(hcclComm_t comm, int64_t deadline);
void hccl_net_teardown(hcclComm_t comm);
hcclResult_t hccl_generic_collective(hcclComm_t comm, const hccl_op_t *op);

/* ---- zero-copy between local ranks (zerocopy.c) ---- */
#define HCCL_ZC_MAPS 4
typedef struct hccl_zc_map {
  int fd;
  uint64_t ino;
  size_t bytes;
  char *base;
} hccl_zc_map_t;
/* Fills *b for a buffer of `bytes` at p: valid only when it lies in one
 * card arena of this process (and zero-copy is enabled). */
void hccl_zc_describe(hcclComm_t comm, const void *p, size_t bytes, hccl_zc_buf_t *b);
/* True when every local rank published valid buffers in round b (need_send,
 * need_recv: which of them the operation reads on that rank; root_local
 * >= 0 limits need_recv to the root). */
bool hccl_zc_all(hcclComm_t comm, int b, bool need_send, bool need_recv, int root_local);
/* The address, in this process, of local rank li's buffer, of which the
 * caller will touch `bytes`. The descriptor is the peer's word: an offset
 * and length outside the arena it names fail the collective
 * (hcclRemoteError), they are never dereferenced. */
hcclResult_t hccl_zc_addr(hcclComm_t comm, int li, const hccl_zc_buf_t *b, size_t bytes, char **out);
void hccl_zc_teardown(hcclComm_t comm);

/* Cross-memory attach (cma.c): process_vm_readv/writev between local ranks,
 * for host buffers (one kernel copy, no staging through the segment). */
#define HCCL_CMA_BLOCK (256u << 10)
extern const uint64_t hccl_cma_probe_word;
bool hccl_cma_usable(hcclComm_t comm);   /* tested once per communicator */
/* Round b: publishes where this rank's send buffer (`bytes` at buf, NULL:
 * none) can be read directly; true when peers can take it without staging
 * (zero-copy or CMA). */
bool hccl_zc_offer_send(hcclComm_t comm, int b, const void *buf, size_t bytes);
/* Round b: how many local ranks offered zero-copy, CMA, and either. */
void hccl_zc_tally(hcclComm_t comm, int b, int *zc, int *cma, int *any);
/* Up to this many bytes a collective takes the small-message path
 * (HCCL_SMALL_BYTES overrides the default: 64 KB for 2 local ranks, else 16 KB). */
size_t hccl_small_bytes(hcclComm_t comm);
hcclResult_t hccl_cma_read(hcclComm_t comm, int li, void *dst, uint64_t src_va, size_t n);
hcclResult_t hccl_cma_write(hcclComm_t comm, int li, uint64_t dst_va, const void *src, size_t n);

/* ---- reductions (reduce_ops.c) ---- */
/* dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i]; dst may alias any source. */
void hccl_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count,
                   hcclDataType_t dt, hcclRedOp_t op);
/* In place: x[i] /= n (hcclAvg's last step). */
void hccl_avg_div(void *x, size_t count, hcclDataType_t dt, int n);
/* memcpy with streaming stores (copy_nt.c): for outputs that will not stay
 * in cache anyway. */
void hccl_copy_stream(void *dst, const void *src, size_t n);
/* memcpy for the bulk copies between callers' buffers and the shared
 * segment (copy_nt.c): avoids glibc's slow case of a destination a few
 * bytes ahead of the source modulo 4 KiB. */
void hccl_copy(void *dst, const void *src, size_t n);
#define HCCL_STREAM_BYTES ((size_t)32 << 20)
static inline hcclRedOp_t hccl_base_op(hcclRedOp_t op) { return op == hcclAvg ? hcclSum : op; }

/* ---- device memory (device.c) ---- */
hcclResult_t hccl_sync_device_buffers(const void *a, const void *b);

#endif
