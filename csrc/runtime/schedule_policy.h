/* The scheduling policy of the C core in one place: how long each kind of
 * thread stays awake before it sleeps, when an op runs on the calling
 * thread instead of the card's queue worker, how large a kernel's parallel
 * tasks are, when a push leaves the queue worker's wake to a pool worker,
 * and how far the host may run ahead of a card. queue.c, parallel.c,
 * spin.c, graph.c, lazy.c and the kernels apply these; the reason for each
 * is here, the measurements behind the values are in docs/PERFORMANCE.md.
 * (HCCL's waits are in hccl/src/wait_policy.h, lazy fusion's tiles in
 * graph/fusion_tiling.h.)
 *
 * These rules decide which thread runs what, so they are where deadlocks
 * and lost wake-ups come from: a change here is a change of every thread's
 * behaviour, and the lock hierarchy (runtime/lock.h) still holds for it. */
#ifndef HPU_RUNTIME_SCHEDULE_POLICY_H
#define HPU_RUNTIME_SCHEDULE_POLICY_H

#include <stdint.h>

/* ---- spinning before sleeping ---- */

/* A spin is bursts of this many pause instructions with a yield between
 * bursts: the thread we wait for may need this CPU. (A process limited to
 * one CPU never spins: see hpu_spin_enabled.) */
#define HPU_SPIN_BURST 64

/* The queue worker stays awake this long after its ring runs dry: the host
 * is often about to enqueue more (a loop of small ops), or is running a
 * kernel whose chunks the worker can take, and a futex wake costs more
 * than a small op. */
#define HPU_WORKER_SPIN_NS 20000

/* A synchronize stays awake this long (running queued tasks and kernel
 * chunks meanwhile) before it sleeps until the next completion: the work
 * it waits for usually ends soon, and sleeping adds a wake-up to every
 * op + synchronize step. */
#define HPU_SYNC_SPIN_NS 100000

/* Idle pool workers stay awake this long for the next job. Waking a
 * sleeping one takes the halted vCPU being scheduled again, a sizeable part
 * of a 1M-element kernel, and an eager step between two kernels (Python,
 * dispatch, allocation) often outlasts a short spin: op + synchronize loops
 * ran faster with this spin than with 20 us. libgomp, under torch, spins
 * longer still. */
#define HPU_POOL_SPIN_NS 500000

/* The thread that started a parallel job spins this long for chunks other
 * threads still run before it sleeps: a late pool thread (a futex wake-up,
 * preemption on shared cores) finishes its chunk soon after. */
#define HPU_CALLER_SPIN_NS 200000

/* A pool worker that starts a job on its caller's CPU moves to another
 * CPU at most this often (parallel.c, leave_caller_cpu): often enough to
 * undo a bad placement within a job or two, rarely enough that on a box
 * with more busy threads than CPUs a worker does not bounce between them
 * (each move is two affinity system calls and a cold cache). Not tuned
 * by measurement. */
#define HPU_COLOCATED_MOVE_NS 1000000

/* ---- run on the caller or queue ---- */

/* Eager ops run on the calling thread, as the card's next task, when the
 * card's queue is idle and hpu_policy_run_on_caller says so; otherwise
 * they go through the queue. Graphs waited for at once (lazy mode's
 * flush-then-wait) are run by the waiting thread too
 * (hpu_graph_run_or_launch). */

/* Kernels up to this many elements over all operands (a [32x32] matmul, an
 * add of 1365 elements) run in well under a microsecond: less than handing
 * them to the queue's worker costs. */
#define HPU_INLINE_MAX_ELEMENTS 4096

/* Kernels from this many elements on keep both cores of a 2-core box busy
 * for tens of microseconds: the queue has little to overlap them with,
 * because the Python thread that would run ahead needs a core the kernel
 * uses. Streamed through the queue, three threads take turns on two cores
 * and a chunk whose thread is preempted holds up the whole kernel; run by
 * the caller, a stream of large adds ran faster with far fewer context
 * switches. Below about this size the queue's overlap with Python pays, or
 * it is a wash. */
#define HPU_INLINE_MIN_LARGE_ELEMENTS (1 << 20)

static inline int hpu_policy_run_on_caller(int64_t elements) {
  return elements <= HPU_INLINE_MAX_ELEMENTS || elements >= HPU_INLINE_MIN_LARGE_ELEMENTS;
}

/* ---- splitting a kernel over threads ---- */

/* Elements (or multiply-adds) per task of a parallel kernel: a kernel of
 * fewer runs on the calling thread alone, larger ones in chunks of about
 * this size. Handing a chunk to a pool thread costs microseconds (a
 * wake-up, the chunk's cache lines moving to another core), which a chunk
 * must outweigh. Chosen when the pool was written, not tuned by
 * measurement since; a kernel whose element costs far more than an add
 * sets its own grain beside its loop, with the measurement (softmax's
 * SOFTMAX_GRAIN in kernels/nn_norm.c). */
#define HPU_GRAIN 32768

/* hpu_parallel_for cuts a range into at most this many chunks per thread,
 * which threads claim as they come: with one chunk per thread, a late pool
 * thread (a futex wake-up, preemption on shared cores) made the caller
 * wait for a whole half of the op on a 2-core box. Not tuned beyond that. */
#define HPU_PARALLEL_SPLIT 4

/* ---- deferred wakes of the queue worker ---- */

/* A push that finds the queue worker asleep does not wake it when a pool
 * worker is awake (and HPU_QUEUE_DEFER_WAKE is not 0): waking it costs the
 * host a futex call and puts a third busy thread on a 2-core box, where the
 * woken worker takes the pool worker's CPU while the host runs the kernel
 * in its synchronize. The awake pool worker runs the task itself, at once,
 * as the card's next task. Not while a pool worker already runs a deferred
 * task of the card, nor for a second push before anyone ran the first
 * (queue.c): then the host is streaming ops rather than waiting for one,
 * and the queue worker should take them. */
static inline int hpu_policy_defer_wake(int enabled, int pool_running_deferred, int pool_worker_awake) {
  return enabled && !pool_running_deferred && pool_worker_awake;
}

/* When the pool worker cannot take a deferred task, it wakes the queue
 * worker this long after the push (or before it sleeps): long enough for
 * the host to get from the op to its synchronize and run the task itself,
 * which is a few microseconds of Python. */
#define HPU_KICK_DELAY_NS 30000

/* ---- how far the host runs ahead ---- */

/* A card's queue holds this many tasks (HPU_QUEUE_DEPTH overrides; as
 * CUDA's launch queue) before a host thread that pushes waits: mark_step
 * and eager ops return at once, so without a bound a host loop that never
 * reads a result runs ahead of the card without limit, holding every queued
 * task's tensors. */
#define HPU_QUEUE_DEPTH_DEFAULT 1024

/* Lazy mode flushes a pending graph when it reaches this many nodes
 * (PT_HPU_MAX_GRAPH_NODES overrides): a loop that never reads a result
 * still hands the card work, and a graph's recording, signature and plan
 * stay bounded. Not tuned by measurement; Gaudi's closest setting is
 * PT_HPU_MAX_COMPOUND_OP_SIZE. */
#define HPU_LAZY_MAX_GRAPH_NODES_DEFAULT 2048

#endif
