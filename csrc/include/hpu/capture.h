/* HPU graphs: capture the ops submitted on a card once, replay them later
 * at the cost of one launch (habana_frameworks' HPUGraph, CUDA graphs).
 *
 * While a card captures, every op submitted for it (eager or lazy) is
 * recorded into the capture instead of running, and anything that would
 * wait for the card (a host read, synchronize, a CPU fallback) fails with a
 * clear error. Memory allocated during the capture belongs to the graph: a
 * tensor freed by its user keeps its block until the graph is destroyed,
 * because replays write it again. Replays read their inputs from the same
 * addresses as the capture did: copy new data into those tensors first.
 * Random ops draw fresh numbers at each replay (the card's default
 * generator advances, as CUDA graphs' Philox offsets do). */
#ifndef HPU_CAPTURE_H
#define HPU_CAPTURE_H

#include "hpu/status.h"
#include "hpu/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpu_captured hpu_captured_t;

hpu_status_t hpu_capture_begin(int device);
/* A capture that, instead of failing at the first operation that cannot be
 * captured, turns into ordinary execution there (wrap_in_hpu_graph's: the
 * caller's code runs once either way, with its results right): what it had
 * recorded is launched, and that operation and everything after it run as
 * usual. hpu_capture_end then sets *captured to NULL. */
hpu_status_t hpu_capture_begin_demotable(int device);
/* If the card is capturing and the capture is demotable, demotes it. Returns
 * nonzero when the card is no longer capturing (the caller may go on), zero
 * when it still is (the caller must fail with a clear error). */
int hpu_capture_demote(int device);
/* Ends the capture and compiles it (fusion plan). */
hpu_status_t hpu_capture_end(int device, hpu_captured_t **captured);
/* Ends a capture and drops what it recorded (after an error). */
void hpu_capture_abort(int device);
int hpu_capture_active(int device);

hpu_status_t hpu_captured_replay(hpu_captured_t *captured, hpu_stream_t stream);
int hpu_captured_num_nodes(const hpu_captured_t *captured);
void hpu_captured_destroy(hpu_captured_t *captured);

#ifdef __cplusplus
}
#endif
#endif
