/* Private glue between the runtime's files (not part of the public API). */
#ifndef HPU_RUNTIME_INTERNAL_H
#define HPU_RUNTIME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hpu/device.h"
#include "hpu/status.h"
#include "hpu/stream.h"

/* device.c: entry checks every device call makes. They fail with
 * HPU_ERROR_FORKED in a child forked after init, initialise lazily
 * (as CUDA does) and, for the _device variant, validate the index. */
hpu_status_t hpu_rt_enter(void);
hpu_status_t hpu_rt_enter_device(int device);
size_t hpu_rt_card_memory(void); /* valid after a successful enter */
int hpu_rt_forked(void);
/* Enter checks plus a stream id that hpu_stream_create handed out. */
hpu_status_t hpu_rt_check_stream(hpu_stream_t stream);

/* arena.c: a card's memfd mapping plus a range allocator for segments. */
typedef struct hpu_arena hpu_arena_t;
hpu_status_t hpu_arena_open(int device, size_t size, hpu_arena_t **arena);
/* Best fit; returns NULL when no free range is large enough. */
void *hpu_arena_alloc(hpu_arena_t *arena, size_t size);
/* Returns the range and punches it out of the memfd (pages go back to the host). */
void hpu_arena_release(hpu_arena_t *arena, void *ptr, size_t size);
int hpu_arena_fd(const hpu_arena_t *arena);
void *hpu_arena_base(const hpu_arena_t *arena);
size_t hpu_arena_size(const hpu_arena_t *arena);

/* queue.c: the card's in-order hardware queue and its worker thread. */
/* Reads HPU_QUEUE_DEPTH and HPU_QUEUE_DEFER_WAKE (hpu_init calls it). */
hpu_status_t hpu_queue_configure(void);
hpu_status_t hpu_queue_push(int device, hpu_task_fn fn, void *arg, void (*release)(void *));
/* Runs the task here, now, when the queue is idle (returns 1); else 0. */
int hpu_queue_run_if_idle(int device, hpu_task_fn fn, void *arg);
/* Waits for everything pushed before the call, then returns (and clears) the
 * card's sticky error, copying its text to this thread's last error. */
hpu_status_t hpu_queue_sync(int device);
/* An error when the calling thread is running a task of this card's queue
 * (it would wait for itself); synchronizers ask before they flush. */
hpu_status_t hpu_queue_check_wait(int device);
/* Waits for everything pushed before the call and leaves the sticky error
 * for the user's next synchronize (for the allocator, before it hands pages
 * back to the host). No-op when called from the card's own worker. */
void hpu_queue_drain(int device);
/* HPU_SUCCESS when idle, NOT_READY when busy, or the sticky error. */
hpu_status_t hpu_queue_query(int device);
/* The card whose worker is the calling thread, or -1. */
int hpu_queue_current_device(void);
/* Deferred wakes of sleeping queue workers (queue.c), run by the pool's
 * workers: 1 when one has waited its delay out; hpu_queue_kick wakes those
 * workers (all of them, due or not, when `all`: the caller goes to sleep). */
int hpu_queue_kicks_due(void);
void hpu_queue_kick(int all);
/* An awake pool worker runs a deferred task itself rather than wake the
 * queue worker: 1 when one could start now (a cheap look); run_deferred
 * runs those, each as its card's next task, and returns how many. */
int hpu_queue_deferred_runnable(void);
int hpu_queue_run_deferred(void);
/* parallel.c: 1 when a pool worker is awake, and so will run the kicks. */
int hpu_parallel_worker_awake(void);
/* parallel.c: checks OMP_NUM_THREADS (for hpu_init: the pool reads it
 * where it cannot report an error). */
hpu_status_t hpu_parallel_configure(void);

/* spin.c: bounded busy-waiting for the queue and the pool. Waits up to
 * budget_ns (0 when the process may use a single CPU: spinning there only
 * delays the thread we wait for) for *word to reach `target`, yielding the
 * CPU between short bursts so an oversubscribed box still progresses.
 * Returns 1 if it did. */
int hpu_spin_wait_ge_u64(const void *word, uint64_t target, uint64_t budget_ns);
/* 0 when spinning is pointless (the process may use one CPU only). */
int hpu_spin_enabled(void);
/* Same, for a condition: spins until cond(arg) returns non-zero and returns
 * that value, or 0 once the budget is spent. cond must be cheap; a value
 * may mean "there is work to do" (the caller does it, then spins again). */
int hpu_spin_until(int (*cond)(void *), void *arg, uint64_t budget_ns);
/* hpu_now_ns, the time base of spin budgets and deferred queue wakes. */
#include "hpu/clock.h"

/* allocator.c: HPU graph capture. Blocks allocated while a capture is on
 * (with thread_only, by the thread that calls this) belong to `owner`:
 * freeing one only marks it, since replays write it again; releasing the
 * owner frees the marked blocks and disowns the rest. */
void hpu_alloc_capture_begin(int device, void *owner, int thread_only);
void hpu_alloc_capture_end(int device);
void hpu_alloc_release_owner(int device, void *owner);
/* Makes one of owner's blocks an ordinary block again (freed when its user
 * frees it): a graph whose replays never write it any more gives it back. */
hpu_status_t hpu_alloc_disown(int device, void *owner, void *ptr);
/* The size of one of owner's blocks; an error when it is not owner's. */
hpu_status_t hpu_alloc_owned_size(int device, void *owner, const void *ptr, size_t *size);

/* Formats a byte count as PyTorch does in its OOM message ("1.50 GiB"). */
void hpu_format_bytes(char *buf, size_t len, uint64_t bytes);

#endif
