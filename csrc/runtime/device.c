/* Cards and process-level runtime state: environment, lazy init, fork guard.
 *
 * Initialisation reads the environment once. A failed init leaves the runtime
 * uninitialised, so a later call re-reads the (possibly fixed) environment.
 * After a successful init a fork handler marks the child: its device calls
 * fail with HPU_ERROR_FORKED, as CUDA's do, because the child holds a copy of
 * the parent's queues and allocator state without their threads. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/device.h"
#include "hpu/env.h"
#include "hpu/trace.h"
#include "hpu/lazy.h"
#include "hpu/status_page.h"
#include "runtime/runtime.h"
#include "runtime/lock.h"

#define DEFAULT_NUM_CARDS 8
#define DEFAULT_CARD_MEMORY ((size_t)16 << 30)
#define SEGMENT_ALIGN ((size_t)2 << 20)

static hpu_mutex_t init_mu = HPU_MUTEX_INIT(HPU_RANK_INIT, "runtime init");
static atomic_int initialized;  /* 1 once init succeeded (0 again in a forked child) */
static atomic_int forked;       /* 1 in a child forked after init */
static int num_cards;           /* physical cards on the host */
static int visible_count;
static int physical_ids[HPU_MAX_CARDS];
static size_t card_memory;
static char visible_env[300];   /* "NAME=value" of the variable that chose the cards, for messages */

static void after_fork_child(void) {
  if (atomic_load(&initialized)) {
    atomic_store(&forked, 1);
    atomic_store(&initialized, 0);
  }
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, after_fork_child); }
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static hpu_status_t forked_error(void) {
  return hpu_error(HPU_ERROR_FORKED,
                   "the hpu runtime cannot be used in a process forked after it was "
                   "initialised; use the 'spawn' start method (multiprocessing) or "
                   "initialise the hpu runtime only in the child");
}

static const char *trim(const char *s, const char **end) {
  while (isspace((unsigned char)*s)) s++;
  const char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) e--;
  *end = e;
  return s;
}

static hpu_status_t parse_num_cards(int *out) {
  long long n;
  hpu_status_t st = hpu_env_int("HPU_NUM_CARDS", DEFAULT_NUM_CARDS, 0, HPU_MAX_CARDS, &n);
  *out = (int)n;
  return st;
}

/* The visible cards, by physical id, in the order listed: "2,3", "all" or
 * empty for every card. Two variables select them: HABANA_VISIBLE_DEVICES,
 * and HABANA_VISIBLE_MODULES (what accelerate's launcher sets for --gpu_ids).
 * When both are set (non-empty), HABANA_VISIBLE_MODULES wins: a launcher sets
 * it for the process it starts, over whatever the shell exported, just as it
 * replaces CUDA_VISIBLE_DEVICES on a GPU. */
static hpu_status_t parse_visible(int cards) {
  const char *name = "HABANA_VISIBLE_MODULES";
  const char *v = getenv(name);
  const char *end, *s = v ? trim(v, &end) : NULL;
  if (!v || s == end) {
    name = "HABANA_VISIBLE_DEVICES";
    v = getenv(name);
    s = v ? trim(v, &end) : NULL;
  }
  visible_env[0] = 0;
  if (!v || s == end || ((size_t)(end - s) == 3 && strncasecmp(s, "all", 3) == 0)) {
    if (v) snprintf(visible_env, sizeof visible_env, "%s=%s", name, v);
    visible_count = cards;
    for (int i = 0; i < cards; i++) physical_ids[i] = i;
    return HPU_SUCCESS;
  }
  snprintf(visible_env, sizeof visible_env, "%s=%s", name, v);
  int count = 0;
  const char *p = s;
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *item_end = comma ? comma : end;
    char item[32];
    size_t len = (size_t)(item_end - p);
    if (len >= sizeof item) len = sizeof item - 1;
    memcpy(item, p, len);
    item[len] = 0;
    const char *iend, *is = trim(item, &iend);
    char *stop;
    errno = 0;
    long id = strtol(is, &stop, 10);
    if (is == iend || stop != iend || errno || id < 0)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "invalid %s='%s': '%s' is not a card id", name, v, item);
    if (id >= cards)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "invalid %s='%s': card %ld does not exist "
                       "(HPU_NUM_CARDS=%d)", name, v, id, cards);
    for (int i = 0; i < count; i++)
      if (physical_ids[i] == id)
        return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                         "invalid %s='%s': card %ld listed twice", name, v, id);
    physical_ids[count++] = (int)id; /* count <= cards <= HPU_MAX_CARDS: no duplicates */
    if (!comma) break;
    p = comma + 1;
    if (p == end)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "invalid %s='%s': trailing comma", name, v);
  }
  visible_count = count;
  return HPU_SUCCESS;
}

/* Bytes with an optional binary K/M/G/T suffix ("16G", "512M", "64KiB"),
 * at most 2^46 (64 TiB) so that the arena stays mappable. */
static hpu_status_t parse_card_memory(size_t *out) {
  unsigned long long bytes;
  hpu_status_t st = hpu_env_size("HPU_CARD_MEMORY", DEFAULT_CARD_MEMORY, 1, 1ULL << 46, &bytes);
  /* Segments are carved in 2 MiB units: round the capacity up to one. */
  *out = ((size_t)bytes + SEGMENT_ALIGN - 1) & ~(SEGMENT_ALIGN - 1);
  return st;
}

/* Every setting init needs, checked. Called with init_mu held. */
static hpu_status_t read_settings(int *cards, size_t *mem) {
  hpu_status_t st = parse_num_cards(cards);
  if (st == HPU_SUCCESS) st = parse_visible(*cards);
  if (st == HPU_SUCCESS) st = parse_card_memory(mem);
  /* The other modules' settings, read lazily where they are used (often
   * where no error can be returned): a bad value fails here, so the user
   * gets an error naming it at the first device call. */
  if (st == HPU_SUCCESS) st = hpu_parallel_configure();
  if (st == HPU_SUCCESS) st = hpu_lazy_configure();
  if (st == HPU_SUCCESS) st = hpu_queue_configure();
  if (st == HPU_SUCCESS) st = hpu_trace_configure();
  return st;
}

hpu_status_t hpu_init(void) {
  if (atomic_load_explicit(&forked, memory_order_acquire)) return forked_error();
  if (atomic_load_explicit(&initialized, memory_order_acquire)) return HPU_SUCCESS;
  hpu_mutex_lock(&init_mu);
  hpu_status_t st = HPU_SUCCESS;
  if (!atomic_load(&initialized)) {
    int cards = 0;
    size_t mem = 0;
    st = read_settings(&cards, &mem);
    if (st == HPU_SUCCESS) st = hpu_status_page_open(visible_count, physical_ids, mem);
    if (st == HPU_SUCCESS) {
      num_cards = cards;
      card_memory = mem;
      pthread_once(&fork_once, register_fork_handler);
      atomic_store_explicit(&initialized, 1, memory_order_release);
    }
  }
  hpu_mutex_unlock(&init_mu);
  return st;
}

int hpu_is_initialized(void) { return atomic_load(&initialized); }

int hpu_rt_forked(void) { return atomic_load_explicit(&forked, memory_order_relaxed); }

hpu_status_t hpu_rt_enter(void) {
  if (__builtin_expect(atomic_load_explicit(&initialized, memory_order_acquire), 1))
    return HPU_SUCCESS;
  return hpu_init(); /* also reports the forked state */
}

hpu_status_t hpu_device_check(int device) {
  hpu_status_t st = hpu_rt_enter();
  if (st != HPU_SUCCESS) return st;
  if (device >= 0 && device < visible_count) return HPU_SUCCESS;
  if (visible_env[0])
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "invalid hpu device index %d: %d card%s visible (%s)",
                     device, visible_count, visible_count == 1 ? "" : "s", visible_env);
  return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                   "invalid hpu device index %d: %d card%s visible (HPU_NUM_CARDS=%d, "
                   "HABANA_VISIBLE_DEVICES and HABANA_VISIBLE_MODULES not set)",
                   device, visible_count, visible_count == 1 ? "" : "s", num_cards);
}

hpu_status_t hpu_rt_enter_device(int device) {
  if (__builtin_expect(atomic_load_explicit(&initialized, memory_order_acquire), 1) &&
      device >= 0 && device < visible_count)
    return HPU_SUCCESS;
  return hpu_device_check(device);
}

size_t hpu_rt_card_memory(void) { return card_memory; }

/* Counting reads the card settings but does not start the runtime, as
 * CUDA's count does not create a context: autograd asks every registered
 * device type for its count, and a process that only asked must still be
 * able to fork children that use the hpu. Until init the answer follows the
 * environment as it is now; init reads it again and fixes it. */
hpu_status_t hpu_device_count(int *count) {
  if (!count) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_device_count: count is NULL");
  if (atomic_load_explicit(&forked, memory_order_acquire)) return forked_error();
  if (atomic_load_explicit(&initialized, memory_order_acquire)) {
    *count = visible_count;
    return HPU_SUCCESS;
  }
  hpu_mutex_lock(&init_mu);
  hpu_status_t st = HPU_SUCCESS;
  if (!atomic_load(&initialized)) {
    /* The same checks as init, so that a bad setting makes the count an
     * error (is_available() False) rather than a failure at first use.
     * parse_visible fills the globals init fills: harmless, since nothing
     * reads them before init, and init reads them again under this lock. */
    int cards = 0;
    size_t mem = 0;
    st = read_settings(&cards, &mem);
  }
  if (st == HPU_SUCCESS) *count = visible_count;
  hpu_mutex_unlock(&init_mu);
  return st;
}

hpu_status_t hpu_device_get_props(int device, hpu_device_props_t *props) {
  if (!props) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_device_get_props: props is NULL");
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "GAUDI2");
  props->physical_id = physical_ids[device];
  props->total_memory = card_memory;
  return HPU_SUCCESS;
}

hpu_status_t hpu_device_synchronize(int device) {
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  if ((st = hpu_queue_check_wait(device)) != HPU_SUCCESS) return st;
  if ((st = hpu_lazy_flush_to_wait(device)) != HPU_SUCCESS) return st;
  return hpu_queue_sync(device);
}

void hpu_format_bytes(char *buf, size_t len, uint64_t b) {
  if (b < 1024) snprintf(buf, len, "%llu bytes", (unsigned long long)b);
  else if (b < (1ULL << 20)) snprintf(buf, len, "%.2f KiB", (double)b / 1024.0);
  else if (b < (1ULL << 30)) snprintf(buf, len, "%.2f MiB", (double)b / (1024.0 * 1024.0));
  else snprintf(buf, len, "%.2f GiB", (double)b / (1024.0 * 1024.0 * 1024.0));
}
