/* The status page (hpu/status_page.h): creation, the writers' updates, and
 * the stale-page checks readers use.
 *
 * Updates go through one pointer that is never NULL: when the page is off
 * (HPU_STATUS_PAGE=0), could not be created, or before init, it points to a
 * private dummy, so the hot paths (every submit, every queue task) pay an
 * atomic load and a relaxed add, with no branch on whether a page exists. */
#define _GNU_SOURCE
#include "hpu/status_page.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hpu/dtype.h"
#include "hpu/env.h"
#include "hpu/memory.h"
#include "hpu/tensor.h"

_Static_assert(offsetof(hpu_status_page_t, start_time) == 48, "status page header layout");
_Static_assert(offsetof(hpu_status_page_t, graph_compilations) == 128, "status page header layout");
_Static_assert(offsetof(hpu_status_page_t, fallbacks) == 144, "status page header layout");
_Static_assert(sizeof(hpu_status_fallback_t) == 64, "status page fallback record");
_Static_assert(sizeof(hpu_status_card_t) == 20 * 8, "status page card record");

static hpu_status_page_t dummy;
static _Atomic(hpu_status_page_t *) page = &dummy;
static char page_name[96];
static pid_t page_pid;

static hpu_status_page_t *cur(void) { return atomic_load_explicit(&page, memory_order_relaxed); }

static void add(uint64_t *field, uint64_t v) { __atomic_fetch_add(field, v, __ATOMIC_RELAXED); }
static void put(uint64_t *field, uint64_t v) { __atomic_store_n(field, v, __ATOMIC_RELAXED); }

void hpu_status_page_name(char *buf, size_t len, int pid) {
  snprintf(buf, len, "/" HPU_STATUS_PAGE_PREFIX "%u.%d", (unsigned)getuid(), pid);
}

uint64_t hpu_status_page_process_start(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  if (!p) return 0;
  /* p+2 is field 3; skip to field 22. */
  p += 2;
  for (int field = 3; field < 22 && p; field++) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  return p ? strtoull(p, NULL, 10) : 0;
}

static void command_line(char *out, size_t len) {
  out[0] = 0;
  FILE *f = fopen("/proc/self/cmdline", "re");
  if (!f) return;
  size_t n = fread(out, 1, len - 1, f);
  fclose(f);
  out[n] = 0;
  while (n > 0 && out[n - 1] == 0) n--; /* arguments are NUL-separated */
  for (size_t i = 0; i < n; i++) /* and may hold newlines (python -c): one table row */
    if ((unsigned char)out[i] < ' ' || out[i] == 0x7f) out[i] = ' ';
}

static void unlink_at_exit(void) {
  /* A child forked after init inherits the mapping and this handler; the
   * page is the parent's. */
  if (getpid() == page_pid) shm_unlink(page_name);
}

static void warn_no_page(const char *why) {
  fprintf(stderr, "[habana_torch] no status page for hl-smi (%s %s: %s); set HPU_STATUS_PAGE=0 "
          "to run without one quietly\n", why, page_name, strerror(errno));
}

/* O_EXCL: a page of that name left by a dead process with our pid is
 * removed first; anything else is not ours to overwrite. */
static int create_object(void) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = shm_open(page_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST || attempt) return fd;
    if (!hpu_status_page_is_stale(page_name + 1)) return -1;
    shm_unlink(page_name);
  }
  return -1;
}

hpu_status_t hpu_status_page_open(int num_cards, const int *physical_ids, uint64_t card_memory) {
  long long on;
  hpu_status_t st = hpu_env_int("HPU_STATUS_PAGE", 1, 0, 1, &on);
  if (st != HPU_SUCCESS || !on || cur() != &dummy) return st;
  page_pid = getpid();
  hpu_status_page_name(page_name, sizeof page_name, (int)page_pid);
  int fd = create_object();
  if (fd < 0) {
    warn_no_page("cannot create");
    return HPU_SUCCESS;
  }
  hpu_status_page_t *p = MAP_FAILED;
  if (ftruncate(fd, sizeof *p) == 0)
    p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    warn_no_page("cannot map");
    close(fd);
    shm_unlink(page_name);
    return HPU_SUCCESS;
  }
  close(fd);
  p->version = HPU_STATUS_PAGE_VERSION;
  p->header_bytes = (uint32_t)offsetof(hpu_status_page_t, fallbacks);
  p->card_bytes = sizeof(hpu_status_card_t);
  p->num_cards = (uint32_t)num_cards;
  p->cards_offset = (uint32_t)offsetof(hpu_status_page_t, cards);
  p->fallback_bytes = sizeof(hpu_status_fallback_t);
  p->num_fallbacks = HPU_STATUS_FALLBACK_SLOTS;
  p->fallbacks_offset = (uint32_t)offsetof(hpu_status_page_t, fallbacks);
  p->pid = (int32_t)page_pid;
  p->start_time = hpu_status_page_process_start((int)page_pid);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  p->created_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  command_line(p->name, sizeof p->name);
  for (int i = 0; i < num_cards && i < HPU_MAX_CARDS; i++) {
    p->cards[i].physical_id = (uint64_t)physical_ids[i];
    p->cards[i].memory_total = card_memory;
  }
  /* Readers take the page as complete once the magic is there. */
  __atomic_store_n(&p->magic, HPU_STATUS_PAGE_MAGIC, __ATOMIC_RELEASE);
  atexit(unlink_at_exit);
  atomic_store_explicit(&page, p, memory_order_release);
  return HPU_SUCCESS;
}

const hpu_status_page_t *hpu_status_page_get(void) {
  hpu_status_page_t *p = atomic_load_explicit(&page, memory_order_acquire);
  return p == &dummy ? NULL : p;
}

/* Devices are validated before any update path; the mask keeps a stray
 * index inside the table all the same. */
static hpu_status_card_t *card(int device) { return &cur()->cards[(unsigned)device % HPU_MAX_CARDS]; }

void hpu_status_page_memory(int device, uint64_t used, uint64_t reserved, uint64_t peak) {
  hpu_status_card_t *c = card(device);
  put(&c->memory_used, used);
  put(&c->memory_reserved, reserved);
  put(&c->memory_peak, peak);
}

void hpu_status_page_task(int device, uint64_t busy_ns) {
  hpu_status_card_t *c = card(device);
  add(&c->busy_ns, busy_ns);
  add(&c->launches, 1);
}

void hpu_status_page_queue_depth(int device, uint64_t depth) { put(&card(device)->queue_depth, depth); }

void hpu_status_page_submit(int device, const hpu_node_t *node) {
  hpu_status_card_t *c = card(device);
  add(&c->kernels, 1);
  if (node->op != HPU_OP_COPY || node->num_inputs < 1 || node->num_outputs < 1) return;
  int src = -1, dst = -1;
  hpu_pointer_get_device(node->inputs[0].storage, &src);
  hpu_pointer_get_device(node->outputs[0].storage, &dst);
  int kind = src < 0 ? HPU_COPY_H2D : dst < 0 ? HPU_COPY_D2H : HPU_COPY_D2D;
  uint64_t bytes = (uint64_t)hpu_tensor_numel(&node->outputs[0]) * hpu_dtype_size(node->outputs[0].dtype);
  add(&c->copy_bytes[kind], bytes);
}

void hpu_status_page_collective(int device, int kind, uint64_t bytes) {
  if (kind < 0 || kind >= HPU_COLL_KINDS || device < 0) return;
  add(&card(device)->coll_bytes[kind], bytes);
}

void hpu_status_page_metric(const char *name, int64_t delta) {
  static const char fallback[] = "cpu_fallback::";
  hpu_status_page_t *p = cur();
  if (delta <= 0) return;
  if (strcmp(name, "graph_compilation") == 0) {
    add(&p->graph_compilations, (uint64_t)delta);
    return;
  }
  if (strncmp(name, fallback, sizeof fallback - 1) != 0) return;
  add(&p->cpu_fallbacks, (uint64_t)delta);
  const char *op = name + sizeof fallback - 1;
  /* Writers are serialised by the metrics lock: a slot's name is written
   * before its count turns non-zero, which readers take as "in use". */
  for (int i = 0; i < HPU_STATUS_FALLBACK_SLOTS; i++) {
    hpu_status_fallback_t *s = &p->fallbacks[i];
    if (!__atomic_load_n(&s->count, __ATOMIC_RELAXED)) {
      snprintf(s->op, sizeof s->op, "%s", op);
      __atomic_store_n(&s->count, (uint64_t)delta, __ATOMIC_RELEASE);
      return;
    }
    if (strncmp(s->op, op, sizeof s->op - 1) == 0) {
      add(&s->count, (uint64_t)delta);
      return;
    }
  }
}

/* The pid in "habana_torch-status.<uid>.<pid>", or -1 for another user's
 * page or a name that is not a page's. */
static int own_page_pid(const char *name) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, HPU_STATUS_PAGE_PREFIX "%u.", (unsigned)getuid());
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0) return -1;
  char *end;
  long pid = strtol(name + n, &end, 10);
  return *end || end == name + n || pid <= 0 ? -1 : (int)pid;
}

int hpu_status_page_is_stale(const char *name) {
  int pid = own_page_pid(name);
  if (pid < 0) return 0;
  uint64_t started = hpu_status_page_process_start(pid);
  if (!started) return 1; /* no such process */
  char path[160];
  snprintf(path, sizeof path, "/%s", name);
  int fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct stat sb;
  int stale = 0;
  if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= offsetof(hpu_status_page_t, fallbacks)) {
    const hpu_status_page_t *p = mmap(NULL, offsetof(hpu_status_page_t, fallbacks), PROT_READ,
                                      MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      /* Only a complete page says when its process started. */
      if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) == HPU_STATUS_PAGE_MAGIC)
        stale = p->pid != pid || p->start_time != started;
      munmap((void *)p, offsetof(hpu_status_page_t, fallbacks));
    }
  }
  close(fd);
  return stale;
}

int hpu_status_page_clean_stale(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (own_page_pid(e->d_name) < 0 || !hpu_status_page_is_stale(e->d_name)) continue;
    char path[300];
    snprintf(path, sizeof path, "/%s", e->d_name);
    removed += shm_unlink(path) == 0;
  }
  closedir(d);
  return removed;
}
