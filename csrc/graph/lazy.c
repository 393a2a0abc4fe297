/* Lazy mode: per-card pending graphs, flushes, compile bookkeeping. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph/dump.h"
#include "graph/fusion.h"
#include "graph/lazy_internal.h"
#include "hpu/capture.h"
#include "hpu/clock.h"
#include "graph/recipe_cache.h"
#include "graph/recipe_disk.h"
#include "graph/signature.h"
#include "hpu/device.h"
#include "hpu/env.h"
#include "hpu/graph.h"
#include "hpu/lazy.h"
#include "hpu/metrics.h"
#include "hpu/status_page.h"
#include "runtime/lock.h"
#include "runtime/schedule_policy.h"

#define PREV_SLOTS 32

typedef struct pending {
  hpu_mutex_t mu;
  hpu_graph_t *graph;       /* NULL when nothing is pending */
  int flushing;             /* a flush has taken the graph and not yet queued or run it */
  hpu_stream_t stream;      /* where the graph will run */
  /* The graphs flushed at each position of the last step (a step ends at
   * mark_step): a recompilation is explained against the graph that ran at
   * the same position before, which is what a user compares. */
  hpu_signature_t prev[PREV_SLOTS];
  int position;             /* graphs flushed since the last mark_step */
} pending_t;

static pending_t cards[HPU_MAX_CARDS] = {[0 ... HPU_MAX_CARDS - 1] = {.mu = HPU_MUTEX_INIT(HPU_RANK_LAZY, "lazy graph")}};

static _Atomic int lazy_state = -1; /* -1: not read from the environment yet */
static _Atomic int env_read;        /* the settings below were read and valid */
static _Atomic int max_nodes = HPU_LAZY_MAX_GRAPH_NODES_DEFAULT;
static hpu_mutex_t env_mu = HPU_MUTEX_INIT(HPU_RANK_LAZY_SETTINGS, "lazy settings");

#define REASONS 64
static hpu_mutex_t reasons_mu = HPU_MUTEX_INIT(HPU_RANK_LEAF, "recompile reasons");
static char reasons[REASONS][640];
static size_t reasons_count;

/* Reads (until it succeeds once) the lazy-mode settings and those of the
 * recipe caches; hpu_init calls it, so a bad value is an error at the first
 * device call. */
hpu_status_t hpu_lazy_configure(void) {
  if (atomic_load(&env_read)) return HPU_SUCCESS;
  hpu_mutex_lock(&env_mu);
  long long mode = 1, nodes = HPU_LAZY_MAX_GRAPH_NODES_DEFAULT;
  hpu_status_t st = HPU_SUCCESS;
  if (!atomic_load(&env_read)) {
    st = hpu_env_int("PT_HPU_LAZY_MODE", 1, 0, 1, &mode); /* lazy by default, as Gaudi */
    if (st == HPU_SUCCESS) st = hpu_env_int("PT_HPU_MAX_GRAPH_NODES", HPU_LAZY_MAX_GRAPH_NODES_DEFAULT, 1, 1 << 30, &nodes);
    if (st == HPU_SUCCESS) st = hpu_recipe_cache_configure();
    if (st == HPU_SUCCESS) st = hpu_recipe_disk_configure();
    if (st == HPU_SUCCESS) {
      max_nodes = (int)nodes;
      int unset = -1; /* hpu_lazy_set_enabled before this keeps its choice */
      atomic_compare_exchange_strong(&lazy_state, &unset, (int)mode);
      atomic_store(&env_read, 1);
    }
  }
  hpu_mutex_unlock(&env_mu);
  return st;
}

int hpu_lazy_enabled(void) {
  int s = atomic_load_explicit(&lazy_state, memory_order_relaxed);
  if (s >= 0) return s;
  /* Before hpu_init; with a bad setting (which hpu_init reports), the
   * default. */
  if (hpu_lazy_configure() != HPU_SUCCESS) return 1;
  return atomic_load(&lazy_state);
}

void hpu_lazy_set_enabled(int enabled) {
  hpu_lazy_enabled(); /* read the other settings once */
  if (!enabled) hpu_lazy_flush_all();
  atomic_store(&lazy_state, enabled ? 1 : 0);
}

static double now_us(void) { return (double)hpu_now_ns() / 1e3; }

void hpu_recompile_note(int device, const char *why) {
  hpu_mutex_lock(&reasons_mu);
  snprintf(reasons[reasons_count % REASONS], sizeof reasons[0], "hpu:%d: %s", device, why);
  reasons_count++;
  hpu_mutex_unlock(&reasons_mu);
  const char *log = getenv("PT_HPU_LOG_GRAPH_COMPILE");
  if (log && strcmp(log, "1") == 0) fprintf(stderr, "[habana_torch] graph compile hpu:%d: %s\n", device, why);
}

int hpu_recompile_reason(size_t n, char *buf, size_t len) {
  hpu_mutex_lock(&reasons_mu);
  int ok = n < reasons_count && n < REASONS;
  if (ok) snprintf(buf, len, "%s", reasons[(reasons_count - 1 - n) % REASONS]);
  hpu_mutex_unlock(&reasons_mu);
  return ok;
}

void hpu_graph_dump_if_asked(int device, const hpu_node_t *nodes, int n, const hpu_plan_t *plan,
                             const uint8_t *dead, uint64_t hash) {
  const char *dir = getenv("PT_HPU_GRAPH_DUMP_DIR");
  const char *vis = getenv("GRAPH_VISUALIZATION");
  if ((!dir || !*dir) && vis && (strcmp(vis, "1") == 0 || strcmp(vis, "true") == 0)) dir = ".graph_dumps";
  if (!dir || !*dir) return;
  static _Atomic int counter;
  mkdir(dir, 0755);
  char prefix[900];
  snprintf(prefix, sizeof prefix, "%s/hpu%d_graph%04d", dir, device, atomic_fetch_add(&counter, 1));
  if (!hpu_graph_dump(prefix, device, nodes, n, plan, dead, hash))
    fprintf(stderr, "[habana_torch] cannot write graph dump %s.txt/.dot\n", prefix);
}

static void remember(pending_t *p, hpu_signature_t *sig) {
  hpu_signature_t *slot = &p->prev[p->position % PREV_SLOTS];
  hpu_signature_free(slot);
  *slot = *sig;
  p->position++;
}

hpu_status_t hpu_lazy_mark_step(int device) {
  hpu_status_t st = hpu_lazy_flush(device);
  if (device >= 0 && device < HPU_MAX_CARDS) {
    hpu_mutex_lock(&cards[device].mu);
    cards[device].position = 0;
    hpu_mutex_unlock(&cards[device].mu);
  }
  return st;
}

/* Hashes the graph, looks its recipe up and compiles on a miss; gives the
 * graph its fusion plan. */
static void compile_or_hit(int device, pending_t *p, hpu_graph_t *g) {
  const hpu_node_t *nodes = hpu_graph_nodes(g);
  int n = hpu_graph_num_nodes(g);
  double t0 = now_us();
  uint8_t *dead = malloc((size_t)n);
  if (!dead) return; /* host OOM: run node by node, uncached */
  hpu_graph_dead_outputs(nodes, n, dead);
  hpu_signature_t sig;
  if (!hpu_signature_build(&sig, nodes, n, dead)) {
    free(dead);
    return;
  }
  hpu_plan_t *plan = NULL;
  int stale = 0;
  double t_lookup = now_us();
  int hit = hpu_recipe_cache_lookup(&sig, nodes, n, dead, &plan, &stale);
  hpu_metric_add("recipe_cache_lookup_us", (int64_t)(now_us() - t_lookup)); /* with the plan check */
  if (hit) {
    hpu_metric_add("recipe_cache_hit", 1);
    remember(p, &sig);
  } else {
    hpu_metric_add("recipe_cache_miss", 1);
    hpu_plan_t *compiled = NULL;
    /* A plan of another aliasing is what the disk would hold too (one file
     * a signature), and its check would refuse it as if it were damaged. */
    int from_disk = !stale && hpu_recipe_disk_load(&sig, nodes, dead, &compiled);
    if (!from_disk) {
      hpu_metric_add("graph_compilation", 1);
      char why[512];
      const hpu_signature_t *before = &p->prev[p->position % PREV_SLOTS];
      if (stale) {
        hpu_metric_add("recipe_cache_alias_miss", 1);
        snprintf(why, sizeof why,
                 "a graph of these shapes ran before, but its operands alias differently "
                 "(views, in-place ops or reused blocks overlap otherwise), so its fused plan "
                 "does not apply");
      } else {
        hpu_signature_explain(before->len ? before : NULL, &sig, nodes, why, sizeof why);
      }
      hpu_recompile_note(device, why);
      compiled = hpu_plan_build(nodes, n, dead);
      hpu_graph_dump_if_asked(device, nodes, n, compiled, dead, sig.hash);
      hpu_recipe_disk_store(&sig, compiled);
    }
    plan = compiled ? hpu_plan_copy(compiled) : NULL;
    hpu_signature_t cached = sig;
    cached.words = malloc(sig.len * sizeof(int64_t));
    if (cached.words) {
      memcpy(cached.words, sig.words, sig.len * sizeof(int64_t));
      cached.cap = sig.len;
      hpu_recipe_cache_insert(&cached, compiled);
    } else {
      hpu_plan_free(compiled);
    }
    remember(p, &sig);
    if (!from_disk) hpu_metric_add("graph_compilation_us", (int64_t)(now_us() - t0));
  }
  free(dead);
  if (plan) {
    hpu_metric_add("fused_nodes", plan->fused_nodes);
    hpu_metric_add("fusion_groups", plan->num_groups);
    hpu_metric_add("dropped_stores", plan->dropped_stores);
    hpu_graph_attach_plan(g, plan);
  }
}

static hpu_status_t flush(int device, int to_wait) {
  if (device < 0 || device >= HPU_MAX_CARDS) return HPU_SUCCESS;
  /* A flush to wait runs or waits for the graph (lock.h); a plain one only
   * takes the lazy lock, which the lock check sees when it is taken. */
  if (to_wait) hpu_lock_check_may_wait("a lazy flush");
  /* Every wait for the card and everything else put on its queue comes
   * through here: none of it can happen in the middle of a capture. */
  if (hpu_capture_active(device) && !hpu_capture_demote(device))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu:%d is capturing an HPU graph: an operation that waits for the card or "
                     "uses it outside the graph (a host read such as .item()/.cpu()/print, "
                     "synchronize, a CPU fallback op, a collective) is not allowed during capture; "
                     "move it out of the captured region",
                     device);
  pending_t *p = &cards[device];
  /* Cheap unlocked peek: most flush points find nothing pending. A graph
   * another thread has taken but not yet queued counts as pending: this
   * flush must not return before it is on the queue (a synchronize would
   * then find the queue idle and return before that work ran). flushing is
   * set before the graph is taken and cleared after it is queued, so a
   * peek that sees the graph gone sees flushing too, or the graph queued. */
  if (!__atomic_load_n(&p->graph, __ATOMIC_SEQ_CST) && !__atomic_load_n(&p->flushing, __ATOMIC_SEQ_CST))
    return HPU_SUCCESS;
  /* Detach, compile and enqueue under one lock, so graphs reach the queue in
   * the order they were recorded. Enqueueing a graph does not flush (see
   * hpu_graph_launch), so this cannot re-enter. A graph run here (to_wait)
   * runs under the lock too: a flush inside it finds no graph at the peek,
   * and another thread's next graph cannot overtake it. */
  hpu_mutex_lock(&p->mu);
  hpu_graph_t *g = p->graph;
  hpu_status_t st = HPU_SUCCESS;
  if (g) {
    __atomic_store_n(&p->flushing, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->graph, NULL, __ATOMIC_SEQ_CST);
    compile_or_hit(device, p, g);
    hpu_metric_add("graph_launch", 1);
    hpu_metric_add("graph_nodes", hpu_graph_num_nodes(g));
    /* both take ownership */
    st = to_wait ? hpu_graph_run_or_launch(g, p->stream) : hpu_graph_launch(g, p->stream);
    __atomic_store_n(&p->flushing, 0, __ATOMIC_SEQ_CST);
  }
  hpu_mutex_unlock(&p->mu);
  return st;
}

hpu_status_t hpu_lazy_flush(int device) { return flush(device, 0); }
hpu_status_t hpu_lazy_flush_to_wait(int device) { return flush(device, 1); }

hpu_status_t hpu_lazy_flush_all(void) {
  hpu_status_t first = HPU_SUCCESS;
  for (int d = 0; d < HPU_MAX_CARDS; d++) {
    hpu_status_t st = hpu_lazy_flush(d);
    if (st != HPU_SUCCESS && first == HPU_SUCCESS) first = st;
  }
  return first;
}

int hpu_lazy_pending(int device) {
  if (device < 0 || device >= HPU_MAX_CARDS) return 0;
  pending_t *p = &cards[device];
  hpu_mutex_lock(&p->mu);
  int n = p->graph ? hpu_graph_num_nodes(p->graph) : 0;
  hpu_mutex_unlock(&p->mu);
  return n;
}

hpu_status_t hpu_submit(hpu_stream_t stream, const hpu_node_t *node) {
  hpu_status_t captured;
  if (stream.device >= 0 && stream.device < HPU_MAX_CARDS) hpu_status_page_submit(stream.device, node);
  if (hpu_capture_record(stream, node, &captured)) return captured;
  if (!hpu_lazy_enabled()) return hpu_launch(stream, node);
  if (stream.device < 0 || stream.device >= HPU_MAX_CARDS)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_submit: invalid device %d", stream.device);
  pending_t *p = &cards[stream.device];
  hpu_mutex_lock(&p->mu);
  hpu_status_t st = HPU_SUCCESS;
  if (!p->graph) {
    hpu_graph_t *g = NULL;
    st = hpu_graph_create(&g);
    if (st == HPU_SUCCESS) __atomic_store_n(&p->graph, g, __ATOMIC_SEQ_CST); /* for the peek */
    p->stream = stream;
  }
  if (st == HPU_SUCCESS) st = hpu_graph_append(p->graph, node); /* validates */
  int full = st == HPU_SUCCESS && hpu_graph_num_nodes(p->graph) >= max_nodes;
  hpu_mutex_unlock(&p->mu);
  if (full) return hpu_lazy_flush(stream.device);
  return st;
}
