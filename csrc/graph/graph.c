/* Graphs of nodes and the one executor path: eager mode launches a one-node
 * graph, lazy mode (later) a recorded one. The stream worker runs the nodes
 * in order and stops at the first failure. */
#include "hpu/graph.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "graph/fusion.h"
#include "hpu/lazy.h"
#include "hpu/metrics.h"
#include "hpu/status.h"
#include "hpu/trace.h"
#include "runtime/runtime.h"
#include "runtime/lock.h"
#include "runtime/schedule_policy.h"

/* Small graphs (every eager op) keep their nodes inline: one malloc per launch. */
#define INLINE_NODES 1

struct hpu_graph {
  hpu_plan_t *plan; /* lazy mode's fusion plan, or NULL: node by node */
  hpu_node_t *nodes;
  int num_nodes, capacity;
  struct hpu_graph *next_free; /* in a recycling list (below) */
  hpu_node_t inline_nodes[INLINE_NODES];
};

/* Every eager op is one graph, created on the host thread and destroyed on
 * the queue's worker. Through malloc that is a cross-thread free per op,
 * and the two threads took turns on glibc's arena lock through futex
 * wake-ups (perf: a tenth of the host's samples). Destroyed graphs
 * are pushed onto a lock-free stack instead; a creating thread takes the
 * whole stack at once into a list of its own, so no pop can race another
 * (the ABA case of a shared pop). */
#define RECYCLED_MAX 256 /* graphs kept in all lists together */
static _Atomic(struct hpu_graph *) returned;
static _Atomic int recycled_count;
static _Thread_local struct hpu_graph *local_free;
static pthread_key_t local_key;
static pthread_once_t local_once = PTHREAD_ONCE_INIT;

/* A thread's own list dies with it (key destructors run while the
 * exiting thread's TLS is still there). */
static void free_local_list(void *list) {
  struct hpu_graph **head = list;
  for (struct hpu_graph *g = *head, *next; g; g = next) {
    next = g->next_free;
    free(g);
    atomic_fetch_sub_explicit(&recycled_count, 1, memory_order_relaxed);
  }
  *head = NULL;
}

static void make_local_key(void) { (void)pthread_key_create(&local_key, free_local_list); }

static struct hpu_graph *take_recycled(void) {
  if (!local_free) {
    local_free = atomic_exchange_explicit(&returned, NULL, memory_order_acquire);
    if (!local_free) return NULL;
    pthread_once(&local_once, make_local_key);
    (void)pthread_setspecific(local_key, &local_free);
  }
  struct hpu_graph *g = local_free;
  local_free = g->next_free;
  atomic_fetch_sub_explicit(&recycled_count, 1, memory_order_relaxed);
  return g;
}

static void recycle(struct hpu_graph *g) {
  if (atomic_fetch_add_explicit(&recycled_count, 1, memory_order_relaxed) >= RECYCLED_MAX) {
    atomic_fetch_sub_explicit(&recycled_count, 1, memory_order_relaxed);
    free(g);
    return;
  }
  struct hpu_graph *head = atomic_load_explicit(&returned, memory_order_relaxed);
  do g->next_free = head;
  while (!atomic_compare_exchange_weak_explicit(&returned, &head, g, memory_order_release,
                                                memory_order_relaxed));
}

/* Lazy graphs grow to thousands of nodes (2 KB each) every step; fresh
 * arrays that size come from the kernel zeroed, and the page faults cost
 * more than recording the nodes. Arrays of finished graphs are kept here
 * (a graph is built on the host thread and freed on the queue thread; a
 * few are kept because the host may run several graphs ahead). */
#define SPARE_ARRAYS 4
static hpu_mutex_t spare_mu = HPU_MUTEX_INIT(HPU_RANK_LEAF, "graph spare list");
static struct { hpu_node_t *nodes; int capacity; } spare[SPARE_ARRAYS];
/* When the host records faster than the queue runs (a busy machine), every
 * spare can be in flight: a new graph then starts at the size the last one
 * reached instead of doubling up from one node, copying as it goes. */
static _Atomic int last_capacity = 2;

static hpu_node_t *take_spare(int need, int *capacity) {
  hpu_node_t *got = NULL;
  hpu_mutex_lock(&spare_mu);
  for (int i = 0; i < SPARE_ARRAYS && !got; i++)
    if (spare[i].nodes && spare[i].capacity >= need) {
      got = spare[i].nodes;
      *capacity = spare[i].capacity;
      spare[i].nodes = NULL;
    }
  hpu_mutex_unlock(&spare_mu);
  return got;
}

static void give_spare(hpu_node_t *nodes, int capacity) {
  atomic_store_explicit(&last_capacity, capacity, memory_order_relaxed);
  hpu_mutex_lock(&spare_mu);
  int slot = -1; /* an empty slot, else the one with the smallest array */
  for (int i = 0; i < SPARE_ARRAYS && slot < 0; i++)
    if (!spare[i].nodes) slot = i;
  if (slot < 0) {
    slot = 0;
    for (int i = 1; i < SPARE_ARRAYS; i++)
      if (spare[i].capacity < spare[slot].capacity) slot = i;
  }
  if (!spare[slot].nodes || spare[slot].capacity < capacity) {
    hpu_node_t *old = spare[slot].nodes;
    spare[slot].nodes = nodes;
    spare[slot].capacity = capacity;
    nodes = old;
  }
  hpu_mutex_unlock(&spare_mu);
  free(nodes);
}

hpu_status_t hpu_graph_create(hpu_graph_t **graph) {
  if (!graph) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "graph_create: graph is NULL");
  hpu_graph_t *g = take_recycled();
  if (!g) g = malloc(sizeof *g);
  if (!g) return hpu_error(HPU_ERROR_SYSTEM, "graph_create: out of host memory");
  g->plan = NULL;
  g->nodes = g->inline_nodes;
  g->num_nodes = 0;
  g->capacity = INLINE_NODES;
  *graph = g;
  return HPU_SUCCESS;
}

void hpu_graph_destroy(hpu_graph_t *graph) {
  if (!graph) return;
  hpu_plan_free(graph->plan);
  if (graph->nodes != graph->inline_nodes) give_spare(graph->nodes, graph->capacity);
  recycle(graph);
}

/* Most operands have at most 4 dims. GCC turned the variable-length
 * memcpy of sizes and strides into REP MOVSQ, whose start-up cost made
 * these copies ~40% of recording a node (perf annotate); short ones are
 * plain moves now. */
static inline void copy_dims(int64_t *dst, const int64_t *src, int nd) {
  switch (nd) {
  case 4: dst[3] = src[3]; /* fall through */
  case 3: dst[2] = src[2]; /* fall through */
  case 2: dst[1] = src[1]; /* fall through */
  case 1: dst[0] = src[0]; /* fall through */
  case 0: return;
  default: memcpy(dst, src, (size_t)nd * sizeof *dst);
  }
}

static void copy_operand(hpu_tensor_t *dst, const hpu_tensor_t *src, int used) {
  if (!used) { /* src may be unset here: read nothing from it */
    dst->storage = NULL;
    dst->offset = 0;
    dst->dtype = HPU_FLOAT32;
    dst->ndim = 0;
    return;
  }
  int nd = src->ndim > 0 && src->ndim <= HPU_MAX_DIMS ? src->ndim : 0;
  dst->storage = src->storage;
  dst->offset = src->offset;
  dst->dtype = src->dtype;
  dst->ndim = src->ndim;
  copy_dims(dst->sizes, src->sizes, nd);
  copy_dims(dst->strides, src->strides, nd);
}

/* A node is about 2 KB, mostly descriptors of operands it does not have
 * (a binary op uses 3 of 8): copying only the used ones is a visible part of
 * the host's cost per recorded op. Unused slots become empty descriptors. */
static void copy_node(hpu_node_t *dst, const hpu_node_t *src) {
  dst->op = src->op;
  dst->num_inputs = src->num_inputs;
  dst->num_outputs = src->num_outputs;
  dst->compute_dtype = src->compute_dtype;
  dst->params = src->params;
  dst->correlation = hpu_trace_active() ? hpu_trace_correlation() : 0;
  for (int k = 0; k < HPU_MAX_INPUTS; k++) copy_operand(&dst->inputs[k], &src->inputs[k], k < src->num_inputs);
  for (int k = 0; k < HPU_MAX_OUTPUTS; k++)
    copy_operand(&dst->outputs[k], &src->outputs[k], k < src->num_outputs);
}

static hpu_status_t append_unchecked(hpu_graph_t *g, const hpu_node_t *node) {
  if (g->num_nodes == g->capacity) {
    int cap = g->capacity * 2;
    if (g->nodes == g->inline_nodes) {
      int typical = atomic_load_explicit(&last_capacity, memory_order_relaxed);
      if (cap < typical) cap = typical;
    }
    hpu_node_t *nodes = take_spare(cap, &cap);
    if (!nodes) nodes = malloc((size_t)cap * sizeof *nodes);
    if (!nodes) return hpu_error(HPU_ERROR_SYSTEM, "graph_append: out of host memory");
    memcpy(nodes, g->nodes, (size_t)g->num_nodes * sizeof *nodes);
    if (g->nodes != g->inline_nodes) free(g->nodes);
    g->nodes = nodes;
    g->capacity = cap;
  }
  copy_node(&g->nodes[g->num_nodes++], node);
  return HPU_SUCCESS;
}

hpu_status_t hpu_graph_append(hpu_graph_t *graph, const hpu_node_t *node) {
  if (!graph) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "graph_append: graph is NULL");
  hpu_status_t st = hpu_node_validate(node);
  if (st != HPU_SUCCESS) return st;
  return append_unchecked(graph, node);
}

int hpu_graph_num_nodes(const hpu_graph_t *graph) { return graph ? graph->num_nodes : 0; }

const hpu_node_t *hpu_graph_nodes(const hpu_graph_t *graph) { return graph ? graph->nodes : NULL; }

/* Runs on the stream worker. */
void hpu_graph_attach_plan(struct hpu_graph *graph, hpu_plan_t *plan) {
  hpu_plan_free(graph->plan);
  graph->plan = plan;
}

static hpu_status_t run_graph(void *arg) {
  const hpu_graph_t *g = arg;
  /* Without a plan: node by node (and traced node by node). */
  return hpu_plan_execute(g->plan, g->nodes, g->num_nodes);
}

static void release_graph(void *arg) { hpu_graph_destroy(arg); }

/* The graph is owned by the call from here on, even when enqueueing fails.
 * It goes straight to the card's queue: lazy mode's flush calls this with
 * its lock held, so it must not flush again (hpu_stream_enqueue would). */
hpu_status_t hpu_graph_launch(hpu_graph_t *graph, hpu_stream_t stream) {
  if (!graph) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "graph_launch: graph is NULL");
  if (graph->num_nodes == 0) {
    hpu_graph_destroy(graph);
    return HPU_SUCCESS;
  }
  hpu_status_t st = hpu_rt_check_stream(stream);
  if (st == HPU_SUCCESS) st = hpu_queue_push(stream.device, run_graph, graph, release_graph);
  if (st != HPU_SUCCESS) hpu_graph_destroy(graph);
  return st;
}

/* The host would otherwise push the graph, often wake the sleeping queue
 * worker (a futex call, then 10-17 us until a vCPU runs it) and then take
 * the task back itself in the wait: an op + synchronize loop in lazy mode
 * spent 7% of its time in the wake. */
hpu_status_t hpu_graph_run_or_launch(hpu_graph_t *graph, hpu_stream_t stream) {
  if (graph && graph->num_nodes > 0 && hpu_rt_check_stream(stream) == HPU_SUCCESS &&
      hpu_queue_run_if_idle(stream.device, run_graph, graph)) {
    hpu_metric_add("graph_launch_at_wait", 1);
    hpu_graph_destroy(graph);
    return HPU_SUCCESS;
  }
  return hpu_graph_launch(graph, stream);
}

/* Which eager ops run on the calling thread (tiny and large ones, when the
 * queue is idle): runtime/schedule_policy.h. */

static int64_t operand_elements(const hpu_node_t *node) {
  int64_t total = 0;
  for (int k = 0; k < node->num_inputs; k++) total += hpu_tensor_numel(&node->inputs[k]);
  for (int k = 0; k < node->num_outputs; k++) total += hpu_tensor_numel(&node->outputs[k]);
  return total;
}

static hpu_status_t run_node(void *node) { return hpu_node_execute(node); }

hpu_status_t hpu_launch(hpu_stream_t stream, const hpu_node_t *node) {
  hpu_status_t st = hpu_node_validate(node);
  if (st != HPU_SUCCESS) return st;
  /* Whatever lazy mode recorded on this card runs first. */
  if ((st = hpu_lazy_flush(stream.device)) != HPU_SUCCESS) return st;
  int64_t elements = operand_elements(node);
  int large = elements >= HPU_INLINE_MIN_LARGE_ELEMENTS;
  /* Traced nodes go through a graph: its copy carries the host op's id. */
  if (hpu_policy_run_on_caller(elements) && !hpu_trace_active() &&
      hpu_rt_check_stream(stream) == HPU_SUCCESS &&
      hpu_queue_run_if_idle(stream.device, run_node, (void *)node)) {
    if (large) hpu_metric_add("eager_inline_large", 1); /* tiny ones are too many to count */
    return HPU_SUCCESS;
  }
  hpu_graph_t *g = NULL;
  if ((st = hpu_graph_create(&g)) != HPU_SUCCESS) return st;
  if ((st = append_unchecked(g, node)) != HPU_SUCCESS) {
    hpu_graph_destroy(g);
    return st;
  }
  return hpu_graph_launch(g, stream);
}
