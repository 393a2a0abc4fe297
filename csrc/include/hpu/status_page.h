/* The status page: what this process's cards are doing, readable by other
 * processes (hl-smi, the metrics exporter) without touching this one.
 *
 * A process that initialises the hpu runtime creates the POSIX shared
 * memory object HPU_STATUS_PAGE_PREFIX "<uid>.<pid>" (O_EXCL, mode 0600)
 * holding one hpu_status_page_t, and unlinks it at exit. A process that
 * dies without exiting (SIGKILL, a crash) leaves it behind: readers
 * recognise such a page because no process with that pid and start time
 * exists (the pid may have been reused) and unlink it.
 *
 * Writers update it with relaxed atomic adds and stores on paths that
 * already run (the allocator, the queue's task runner, submit, HCCL's
 * collectives); no lock is taken. Readers see each 64-bit field whole but
 * not a consistent snapshot of all of them, which is all a monitor needs.
 *
 * The layout is versioned: a reader checks magic and version and finds the
 * tables through the offsets and record sizes in the header, so fields can
 * be appended to a record without breaking older readers. Everything is
 * little-endian, naturally aligned, no padding (checked at compile time in
 * status_page.c). python/habana_smi/pages.py reads the same layout. */
#ifndef HPU_STATUS_PAGE_H
#define HPU_STATUS_PAGE_H

#include <stddef.h>
#include <stdint.h>

#include "hpu/device.h"
#include "hpu/op.h"
#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HPU_STATUS_PAGE_MAGIC 0x3145474154535048ULL /* "HPSTAGE1" in memory */
#define HPU_STATUS_PAGE_VERSION 1
#define HPU_STATUS_PAGE_PREFIX "habana_torch-status."
#define HPU_STATUS_FALLBACK_SLOTS 32

enum { HPU_COPY_H2D, HPU_COPY_D2H, HPU_COPY_D2D, HPU_COPY_KINDS };
enum {
  HPU_COLL_ALLREDUCE, HPU_COLL_BROADCAST, HPU_COLL_REDUCE, HPU_COLL_ALLGATHER,
  HPU_COLL_REDUCE_SCATTER, HPU_COLL_ALLTOALL, HPU_COLL_SEND, HPU_COLL_RECV, HPU_COLL_KINDS
};

/* One visible card of the process (index = the process's device index). */
typedef struct hpu_status_card {
  uint64_t physical_id;
  uint64_t memory_total;    /* HPU_CARD_MEMORY */
  uint64_t memory_reserved; /* segments the caching allocator holds */
  uint64_t memory_used;     /* bytes of live tensors */
  uint64_t memory_peak;     /* peak of memory_used (reset_peak_memory_stats) */
  uint64_t busy_ns;         /* time the card's queue spent running tasks */
  uint64_t kernels;         /* ops submitted (alone or in a lazy graph) */
  uint64_t launches;        /* queue tasks run (an eager op, a lazy graph, a collective) */
  uint64_t queue_depth;     /* tasks waiting in the queue */
  uint64_t copy_bytes[HPU_COPY_KINDS];
  uint64_t coll_bytes[HPU_COLL_KINDS]; /* count x dtype size of each collective */
} hpu_status_card_t;

typedef struct hpu_status_fallback {
  uint64_t count;  /* the slot is in use once count > 0 */
  char op[56];     /* "aten::foo", NUL-terminated */
} hpu_status_fallback_t;

typedef struct hpu_status_page {
  uint64_t magic;
  uint32_t version, header_bytes;
  uint32_t card_bytes, num_cards;      /* record size, visible cards */
  uint32_t cards_offset, fallback_bytes;
  uint32_t num_fallbacks, fallbacks_offset;
  int32_t pid;
  uint32_t reserved0;
  uint64_t start_time;     /* field 22 of /proc/<pid>/stat: clock ticks after boot */
  uint64_t created_unix_ns;
  char name[64];           /* the command line, truncated */
  uint64_t graph_compilations;
  uint64_t cpu_fallbacks;  /* all ops; by op in fallbacks[] (the first 32 ops) */
  hpu_status_fallback_t fallbacks[HPU_STATUS_FALLBACK_SLOTS];
  hpu_status_card_t cards[HPU_MAX_CARDS];
} hpu_status_page_t;

/* hpu_init: reads HPU_STATUS_PAGE (0 = off, 1 = on, the default) and
 * publishes the page for the visible cards. A page that cannot be created
 * is reported once on stderr and the process runs without one; only a bad
 * HPU_STATUS_PAGE value is an error. */
hpu_status_t hpu_status_page_open(int num_cards, const int *physical_ids, uint64_t card_memory);
/* The page this process writes, or NULL when there is none. */
const hpu_status_page_t *hpu_status_page_get(void);
/* "/habana_torch-status.<uid>.<pid>" into buf. */
void hpu_status_page_name(char *buf, size_t len, int pid);

/* Updates; device is the process's device index. Cheap and lock-free: when
 * there is no page they write to a private dummy. */
void hpu_status_page_memory(int device, uint64_t used, uint64_t reserved, uint64_t peak);
void hpu_status_page_task(int device, uint64_t busy_ns);
void hpu_status_page_queue_depth(int device, uint64_t depth);
/* A node submitted to the card: counts it, and a copy's bytes by direction. */
void hpu_status_page_submit(int device, const hpu_node_t *node);
void hpu_status_page_collective(int device, int kind, uint64_t bytes);
/* hpu_metric_add mirrors the counters another process may want here
 * (graph_compilation, cpu_fallback::<op>); called under the metrics lock. */
void hpu_status_page_metric(const char *name, int64_t delta);

/* Readers. 1 when the page named `name` (as in /dev/shm, without the
 * slash) belongs to no living process: its pid is gone, or runs a process
 * started at another time than the page's. A page still being created by
 * a living process is not stale. */
int hpu_status_page_is_stale(const char *name);
/* Field 22 of /proc/<pid>/stat (when the process started, in clock ticks
 * after boot), or 0 when there is no such process. */
uint64_t hpu_status_page_process_start(int pid);
/* Unlinks this user's stale pages; returns how many. */
int hpu_status_page_clean_stale(void);

#ifdef __cplusplus
}
#endif

#endif
