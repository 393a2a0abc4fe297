/* HPU graphs: capture the ops submitted on a card once, replay them later
 * at the cost of one launch (habana_frameworks' HPUGraph, CUDA graphs).
 *
 * While a card captures, every op submitted for it (eager or lazy) is
 * recorded into the capture instead of running, and anything that would
 * wait for the card (a host read, synchronize, a CPU fallback) fails with a
 * clear error. Memory allocated during the capture belongs to the graph: a
 * tensor freed by its user keeps its block until the graph is destroyed,
 * because replays write it again (later allocations of the same capture
 * reuse it). Replays read their inputs from the same
 * addresses as the capture did: copy new data into those tensors first.
 * Random ops draw fresh numbers at each replay (the card's default
 * generator advances, as CUDA graphs' Philox offsets do). */
#ifndef HPU_CAPTURE_H
#define HPU_CAPTURE_H

#include <stdint.h>

#include "hpu/status.h"
#include "hpu/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpu_captured hpu_captured_t;

hpu_status_t hpu_capture_begin(int device);
/* A capture that, instead of failing at the first operation that cannot be
 * captured, turns into ordinary execution there (wrap_in_hpu_graph's and a
 * compiled graph's: the caller's code runs once either way, with its
 * results right): what it had recorded is launched, and that operation and
 * everything after it run as usual. hpu_capture_end then sets *captured to
 * NULL. It records only the work of the thread that began it (a compiled
 * graph's ops are all on one thread); other threads' work and memory stay
 * theirs, so a collective or a copy another thread submits meanwhile is
 * not replayed with the graph. */
hpu_status_t hpu_capture_begin_demotable(int device);
/* If the card is capturing and the capture is demotable, demotes it. Returns
 * nonzero when the card is no longer capturing (the caller may go on), zero
 * when it still is (the caller must fail with a clear error). */
int hpu_capture_demote(int device);
/* Ends the capture and compiles it (fusion plan). */
hpu_status_t hpu_capture_end(int device, hpu_captured_t **captured);
/* Ends a capture and drops what it recorded (after an error). */
void hpu_capture_abort(int device);
/* Whether the calling thread's work on the card is being captured. */
int hpu_capture_active(int device);

hpu_status_t hpu_captured_replay(hpu_captured_t *captured, hpu_stream_t stream);

/* A replay with some storages moved: every operand the capture recorded on
 * storage `from` uses `to` instead (same offsets, sizes and strides). This
 * is how a compiled graph runs on each call's own inputs and writes each
 * call's outputs into fresh memory, with no copy in or out. `to_bytes` is
 * the size of `to`: a replay that would reach past it fails before
 * anything runs. The `from` storages must be distinct. */
typedef struct hpu_rebind {
  const void *from;
  void *to;
  size_t to_bytes;
} hpu_rebind_t;
hpu_status_t hpu_captured_replay_rebound(hpu_captured_t *captured, hpu_stream_t stream,
                                         const hpu_rebind_t *rebinds, int num_rebinds);
/* Gives a block allocated during the capture back to the ordinary pool
 * (freed when its user frees it). Only for a storage every later replay
 * rebinds elsewhere: no replay may write it again. */
hpu_status_t hpu_captured_release_block(hpu_captured_t *captured, void *ptr);
/* Whether ptr is a block the capture allocated and the graph still holds. */
int hpu_captured_owns(const hpu_captured_t *captured, const void *ptr);
/* How many bytes from `storage` the graph's operands on it reach: what a
 * storage rebound in its place needs. Within a capture a block its user
 * freed is reused by the capture's next allocations, so an output's block
 * may have held a larger temporary first. */
uint64_t hpu_captured_extent(const hpu_captured_t *captured, const void *storage);
int hpu_captured_num_nodes(const hpu_captured_t *captured);
void hpu_captured_destroy(hpu_captured_t *captured);

#ifdef __cplusplus
}
#endif
#endif
