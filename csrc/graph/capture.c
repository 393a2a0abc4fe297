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
  pthread_t thread;            /* that began it: a demotable capture records only its work */
  int demoted;                 /* it turned into execution; hpu_capture_end says so */
  hpu_status_t demote_status;  /* how launching what it had recorded went */
  hpu_stream_t stream;         /* of the first recorded node */
  int recorded;                /* stream is set */
} capture_state_t;

static capture_state_t states[HPU_MAX_CARDS] = {
    [0 ... HPU_MAX_CARDS - 1] = {.mu = HPU_MUTEX_INIT(HPU_RANK_CAPTURE, "capture")}};

/* Whether the card is capturing, for any thread. */
static int capturing(int device) {
  if (device < 0 || device >= HPU_MAX_CARDS) return 0;
  return __atomic_load_n(&states[device].active, __ATOMIC_ACQUIRE) != NULL;
}

/* Whether the calling thread's work on the card is captured. thread and
 * demotable are written before active is published; atomically, since a
 * thread that saw the last capture active may read them as the next one
 * begins (pthread_t is an integer on the platforms we build for). */
int hpu_capture_active(int device) {
  if (!capturing(device)) return 0;
  capture_state_t *s = &states[device];
  if (!__atomic_load_n(&s->demotable, __ATOMIC_ACQUIRE)) return 1;
  return pthread_equal(__atomic_load_n(&s->thread, __ATOMIC_RELAXED), pthread_self());
}

static hpu_status_t begin(int device, int demotable) {
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  capture_state_t *s = &states[device];
  if (capturing(device))
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
  hpu_alloc_capture_begin(device, c, demotable);
  __atomic_store_n(&s->thread, pthread_self(), __ATOMIC_RELAXED);
  __atomic_store_n(&s->demotable, demotable, __ATOMIC_RELEASE);
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

typedef struct rebinding {
  const hpu_rebind_t *sorted; /* by `from` */
  int n;
} rebinding_t;

static int by_from(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const hpu_rebind_t *)a)->from, y = (uintptr_t)((const hpu_rebind_t *)b)->from;
  return (x > y) - (x < y);
}

static const hpu_rebind_t *find_rebind(const rebinding_t *r, const void *storage) {
  int lo = 0, hi = r->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if ((uintptr_t)r->sorted[mid].from < (uintptr_t)storage) lo = mid + 1;
    else hi = mid;
  }
  return lo < r->n && r->sorted[lo].from == storage ? &r->sorted[lo] : NULL;
}

static hpu_status_t rebind_operand(const rebinding_t *r, hpu_tensor_t *t, const hpu_node_t *node) {
  const hpu_rebind_t *b = find_rebind(r, t->storage);
  if (!b) return HPU_SUCCESS;
  uint64_t end = hpu_tensor_end_offset(t);
  if (end > b->to_bytes)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "HPU graph replay: %s reaches %llu bytes into a storage rebound to one of %zu bytes",
                     hpu_op_name(node->op), (unsigned long long)end, b->to_bytes);
  t->storage = b->to;
  return HPU_SUCCESS;
}

static hpu_status_t rebind_node(const rebinding_t *r, hpu_node_t *node) {
  hpu_status_t st = HPU_SUCCESS;
  for (int k = 0; k < node->num_inputs && st == HPU_SUCCESS; k++) st = rebind_operand(r, &node->inputs[k], node);
  for (int k = 0; k < node->num_outputs && st == HPU_SUCCESS; k++) st = rebind_operand(r, &node->outputs[k], node);
  return st;
}

/* Queues nodes as one graph on stream, random ops drawing fresh numbers
 * (a replay, or a demoted capture's recorded part), operands moved as
 * `rebinding` says (NULL: none). */
static hpu_status_t launch_nodes(int device, const hpu_node_t *nodes, int n, const hpu_plan_t *plan,
                                 hpu_stream_t stream, const rebinding_t *rebinding) {
  hpu_graph_t *g = NULL;
  hpu_status_t st = hpu_graph_create(&g);
  if (st != HPU_SUCCESS) return st;
  hpu_generator_t *gen = NULL;
  for (int i = 0; i < n && st == HPU_SUCCESS; i++) {
    hpu_node_t node = nodes[i];
    if (rebinding && (st = rebind_node(rebinding, &node)) != HPU_SUCCESS) break;
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
    if (copy) {
      /* counted as a lazy flush counts the plan it runs */
      hpu_metric_add("fused_nodes", plan->fused_nodes);
      hpu_metric_add("fusion_groups", plan->num_groups);
      hpu_metric_add("dropped_stores", plan->dropped_stores);
      hpu_graph_attach_plan(g, copy);
    }
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
  if (g && recorded) st = launch_nodes(device, hpu_graph_nodes(g), hpu_graph_num_nodes(g), NULL, stream, NULL);
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
  hpu_graph_dump_if_asked(device, c->nodes, n, c->plan, dead, 0);
  free(dead);
  hpu_metric_add("hpu_graph_capture", 1);
  hpu_metric_add("graph_compilation", 1);
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
  return launch_nodes(c->device, c->nodes, c->num_nodes, c->plan, stream, NULL);
}

hpu_status_t hpu_captured_replay_rebound(hpu_captured_t *c, hpu_stream_t stream, const hpu_rebind_t *rebinds,
                                         int num_rebinds) {
  if (num_rebinds < 0 || (num_rebinds > 0 && !rebinds))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: %d rebound storages and no list", num_rebinds);
  if (num_rebinds == 0) return hpu_captured_replay(c, stream);
  hpu_rebind_t *sorted = malloc((size_t)num_rebinds * sizeof *sorted);
  if (!sorted) return hpu_error(HPU_ERROR_SYSTEM, "replay: out of host memory");
  memcpy(sorted, rebinds, (size_t)num_rebinds * sizeof *sorted);
  qsort(sorted, (size_t)num_rebinds, sizeof *sorted, by_from);
  hpu_status_t st = HPU_SUCCESS;
  for (int i = 0; i < num_rebinds && st == HPU_SUCCESS; i++) {
    if (!sorted[i].from || !sorted[i].to)
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: a rebound storage is NULL");
    else if (i > 0 && sorted[i].from == sorted[i - 1].from)
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: storage %p is rebound twice", sorted[i].from);
  }
  if (st == HPU_SUCCESS) {
    rebinding_t r = {sorted, num_rebinds};
    if (!c)
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: no captured graph");
    else if (stream.device != c->device)
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "replay: graph captured on hpu:%d, stream on hpu:%d",
                     c->device, stream.device);
    else if ((st = hpu_lazy_flush(c->device)) == HPU_SUCCESS) {
      hpu_metric_add("hpu_graph_replay", 1);
      st = launch_nodes(c->device, c->nodes, c->num_nodes, c->plan, stream, &r);
    }
  }
  free(sorted);
  return st;
}

int hpu_captured_owns(const hpu_captured_t *c, const void *ptr) {
  size_t size;
  return c && hpu_alloc_owned_size(c->device, (void *)c, ptr, &size) == HPU_SUCCESS;
}

uint64_t hpu_captured_extent(const hpu_captured_t *c, const void *storage) {
  uint64_t extent = 0;
  for (int i = 0; c && i < c->num_nodes; i++) {
    const hpu_node_t *n = &c->nodes[i];
    for (int k = 0; k < n->num_inputs + n->num_outputs; k++) {
      const hpu_tensor_t *t = k < n->num_inputs ? &n->inputs[k] : &n->outputs[k - n->num_inputs];
      if (t->storage == storage && hpu_tensor_end_offset(t) > extent) extent = hpu_tensor_end_offset(t);
    }
  }
  return extent;
}

hpu_status_t hpu_captured_release_block(hpu_captured_t *c, void *ptr) {
  if (!c) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "release: no captured graph");
  size_t size;
  hpu_status_t st = hpu_alloc_owned_size(c->device, c, ptr, &size);
  if (st != HPU_SUCCESS) return st;
  /* Replays rebind every operand on ptr; one on another storage reaching
   * into the block would still write it after it went back to the pool. */
  uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
  for (int i = 0; i < c->num_nodes; i++) {
    const hpu_node_t *n = &c->nodes[i];
    for (int k = 0; k < n->num_inputs + n->num_outputs; k++) {
      const hpu_tensor_t *t = k < n->num_inputs ? &n->inputs[k] : &n->outputs[k - n->num_inputs];
      if (t->storage == ptr || hpu_tensor_numel(t) == 0) continue;
      uintptr_t start = (uintptr_t)t->storage + (uintptr_t)t->offset;
      uintptr_t end = (uintptr_t)t->storage + (uintptr_t)hpu_tensor_end_offset(t);
      if (start < hi && end > lo)
        return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                         "release: block %p is also reached through storage %p (%s)", ptr, t->storage,
                         hpu_op_name(n->op));
    }
  }
  return hpu_alloc_disown(c->device, c, ptr);
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
