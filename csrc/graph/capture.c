/* HPU graph capture and replay (see hpu/capture.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "graph/fusion.h"
#include "graph/lazy_internal.h"
#include "hpu/capture.h"
#include "hpu/device.h"
#include "hpu/graph.h"
#include "hpu/lazy.h"
#include "hpu/metrics.h"
#include "hpu/rng.h"
#include "runtime/runtime.h"
#include "runtime/lock.h"

struct hpu_captured {
  int device;
  hpu_node_t *nodes;
  int num_nodes;
  hpu_plan_t *plan;
};

typedef struct capture_state {
  hpu_mutex_t mu;
  hpu_captured_t *active; /* being recorded */
  hpu_graph_t *graph;
  int demotable;               /* begun by hpu_capture_begin_demotable */
  int demoted;                 /* it turned into execution; hpu_capture_end says so */
  hpu_status_t demote_status;  /* how launching what it had recorded went */
  hpu_stream_t stream;         /* of the first recorded node */
  int recorded;                /* stream is set */
} capture_state_t;

static capture_state_t states[HPU_MAX_CARDS] = {
    [0 ... HPU_MAX_CARDS - 1] = {.mu = HPU_MUTEX_INIT(HPU_RANK_CAPTURE, "capture")}};

int hpu_capture_active(int device) {
  if (device < 0 || device >= HPU_MAX_CARDS) return 0;
  return __atomic_load_n(&states[device].active, __ATOMIC_ACQUIRE) != NULL;
}

static hpu_status_t begin(int device, int demotable) {
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  capture_state_t *s = &states[device];
  if (hpu_capture_active(device))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu:%d is already capturing an HPU graph", device);
  /* What was recorded before belongs to no graph: run it first. */
  if ((st = hpu_lazy_flush(device)) != HPU_SUCCESS) return st;
  hpu_captured_t *c = calloc(1, sizeof *c);
  if (!c) return hpu_error(HPU_ERROR_SYSTEM, "capture_begin: out of host memory");
  c->device = device;
  hpu_mutex_lock(&s->mu);
  if ((st = hpu_graph_create(&s->graph)) != HPU_SUCCESS) {
    hpu_mutex_unlock(&s->mu);
    free(c);
    return st;
  }
  hpu_alloc_capture_begin(device, c);
  s->demotable = demotable;
  s->demoted = 0;
  s->demote_status = HPU_SUCCESS;
  s->recorded = 0;
  __atomic_store_n(&s->active, c, __ATOMIC_RELEASE);
  hpu_mutex_unlock(&s->mu);
  return HPU_SUCCESS;
}

hpu_status_t hpu_capture_begin(int device) { return begin(device, 0); }

hpu_status_t hpu_capture_begin_demotable(int device) { return begin(device, 1); }

int hpu_capture_record(hpu_stream_t stream, const hpu_node_t *node, hpu_status_t *st) {
  int device = stream.device;
  if (!hpu_capture_active(device)) return 0;
  capture_state_t *s = &states[device];
  hpu_mutex_lock(&s->mu);
  if (!s->active) {
    hpu_mutex_unlock(&s->mu);
    return 0;
  }
  if (!s->recorded) {
    s->stream = stream;
    s->recorded = 1;
  }
  *st = hpu_graph_append(s->graph, node);
  hpu_mutex_unlock(&s->mu);
  return 1;
}

static hpu_captured_t *detach(int device, hpu_graph_t **graph) {
  capture_state_t *s = &states[device];
  hpu_mutex_lock(&s->mu);
  hpu_captured_t *c = s->active;
  *graph = s->graph;
  s->graph = NULL;
  __atomic_store_n(&s->active, NULL, __ATOMIC_RELEASE);
  hpu_mutex_unlock(&s->mu);
  hpu_alloc_capture_end(device);
  return c;
}

/* Queues nodes as one graph on stream, random ops drawing fresh numbers
 * (a replay, or a demoted capture's recorded part). */
static hpu_status_t launch_nodes(int device, const hpu_node_t *nodes, int n, const hpu_plan_t *plan,
                                 hpu_stream_t stream) {
  hpu_graph_t *g = NULL;
  hpu_status_t st = hpu_graph_create(&g);
  if (st != HPU_SUCCESS) return st;
  hpu_generator_t *gen = NULL;
  for (int i = 0; i < n && st == HPU_SUCCESS; i++) {
    hpu_node_t node = nodes[i];
    if (node.op >= HPU_OP_RNG_UNIFORM && node.op <= HPU_OP_RNG_RANDOM) {
      if (!gen) st = hpu_generator_default(device, &gen);
      if (st == HPU_SUCCESS) st = hpu_generator_prepare(gen, &node);
    }
    if (st == HPU_SUCCESS) st = hpu_graph_append(g, &node);
  }
  if (st != HPU_SUCCESS) {
    hpu_graph_destroy(g);
    return st;
  }
  if (plan) {
    hpu_plan_t *copy = hpu_plan_copy(plan);
    if (copy) hpu_graph_attach_plan(g, copy);
  }
  return hpu_graph_launch(g, stream);
}

int hpu_capture_demote(int device) {
  if (!hpu_capture_active(device)) return 1;
  capture_state_t *s = &states[device];
  hpu_mutex_lock(&s->mu);
  int demotable = s->active && s->demotable;
  hpu_stream_t stream = s->stream;
  int recorded = s->recorded;
  hpu_mutex_unlock(&s->mu);
  if (!demotable) return 0;
  hpu_graph_t *g = NULL;
  hpu_captured_t *c = detach(device, &g);
  if (!c) return 1; /* another thread demoted it first */
  hpu_status_t st = HPU_SUCCESS;
  /* Launched before the capture's blocks go back to the pool: work queued
   * after it may reuse them, but runs after it on the card's queue. */
  if (g && recorded) st = launch_nodes(device, hpu_graph_nodes(g), hpu_graph_num_nodes(g), NULL, stream);
  hpu_graph_destroy(g);
  hpu_alloc_release_owner(device, c);
  free(c);
  hpu_mutex_lock(&s->mu);
  s->demoted = 1;
  s->demote_status = st;
  hpu_mutex_unlock(&s->mu);
  hpu_metric_add("hpu_graph_demoted", 1);
  return 1;
}

/* Whether the card's last capture was demoted (and forgets it). */
static int take_demoted(int device, hpu_status_t *st) {
  capture_state_t *s = &states[device];
  hpu_mutex_lock(&s->mu);
  int demoted = s->demoted;
  *st = s->demote_status;
  s->demoted = 0;
  s->demote_status = HPU_SUCCESS;
  hpu_mutex_unlock(&s->mu);
  return demoted;
}

void hpu_capture_abort(int device) {
  hpu_status_t ignored;
  if (device >= 0 && device < HPU_MAX_CARDS) (void)take_demoted(device, &ignored);
  if (!hpu_capture_active(device)) return;
  hpu_graph_t *g = NULL;
  hpu_captured_t *c = detach(device, &g);
  hpu_graph_destroy(g);
  if (c) {
    hpu_alloc_release_owner(device, c);
    free(c);
  }
}

hpu_status_t hpu_capture_end(int device, hpu_captured_t **out) {
  *out = NULL;
  if (!hpu_capture_active(device)) {
    hpu_status_t st;
    if (device >= 0 && device < HPU_MAX_CARDS && take_demoted(device, &st)) return st;
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu:%d is not capturing an HPU graph", device);
  }
  hpu_graph_t *g = NULL;
  hpu_captured_t *c = detach(device, &g);
  int n = hpu_graph_num_nodes(g);
  c->nodes = malloc((size_t)(n > 0 ? n : 1) * sizeof *c->nodes);
  uint8_t *dead = malloc((size_t)(n > 0 ? n : 1));
  if (!c->nodes || !dead) {
    free(dead);
    hpu_graph_destroy(g);
    hpu_captured_destroy(c);
    return hpu_error(HPU_ERROR_SYSTEM, "capture_end: out of host memory");
  }
  memcpy(c->nodes, hpu_graph_nodes(g), (size_t)n * sizeof *c->nodes);
  c->num_nodes = n;
  hpu_graph_destroy(g);
  /* Temporaries freed during the capture are dead after each replay. */
  hpu_graph_dead_outputs(c->nodes, n, dead);
  c->plan = hpu_plan_build(c->nodes, n, dead);
  free(dead);
  hpu_metric_add("hpu_graph_capture", 1);
  *out = c;
  return HPU_SUCCESS;
}

hpu_status_t hpu_captured_replay(hpu_captured_t *c, hpu_stream_t stream) {
  if (!c) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: no captured graph");
  if (stream.device != c->device)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: graph captured on hpu:%d, stream on hpu:%d",
                     c->device, stream.device);
  hpu_status_t st;
  if ((st = hpu_lazy_flush(c->device)) != HPU_SUCCESS) return st;
  hpu_metric_add("hpu_graph_replay", 1);
  return launch_nodes(c->device, c->nodes, c->num_nodes, c->plan, stream);
}

int hpu_captured_num_nodes(const hpu_captured_t *c) { return c ? c->num_nodes : 0; }

void hpu_captured_destroy(hpu_captured_t *c) {
  if (!c) return;
  /* Replays still queued read and write the graph's blocks. */
  hpu_queue_drain(c->device);
  hpu_alloc_release_owner(c->device, c);
  hpu_plan_free(c->plan);
  free(c->nodes);
  free(c);
}
