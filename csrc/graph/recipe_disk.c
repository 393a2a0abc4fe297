/* Recipes persisted on disk, as Gaudi's PT_HPU_RECIPE_CACHE_CONFIG:
 *
 *   PT_HPU_RECIPE_CACHE_CONFIG=<dir>[,<delete at start: true|false>[,<max MB>]]
 *
 * Each compiled recipe is a file <dir>/<hash>.recipe holding the graph
 * signature it was compiled for and its plan; another process running the
 * same graphs loads it instead of compiling.
 *
 * The directory may be shared, or written by someone else: a file is data,
 * never trusted. It is used only when it is a regular file (not a symbolic
 * link, a FIFO...), of exactly the size its header implies, its checksum
 * (over header and payload) matches, its whole signature equals the
 * graph's, and its plan is one the planner itself would make for the nodes
 * at hand (hpu_plan_check: the planner's own admission tests, so every
 * index and element count the executor uses is the graph's). Anything else
 * is a cache miss: the graph is compiled as usual, the file is named on
 * stderr with the reason and counted (recipe_cache_disk_rejected), and the
 * new recipe replaces it.
 *
 * A directory this creates is private (0700); an existing one is used as
 * it is (a cache shared on purpose keeps its mode), with files created
 * under the umask. Writes go to a temporary file with an unpredictable
 * name, created O_EXCL|O_NOFOLLOW and renamed into place, so concurrent
 * processes never see half a file and nobody can plant the temporary. */
#define _GNU_SOURCE
#include "graph/recipe_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hpu/clock.h"
#include "hpu/env.h"
#include "hpu/metrics.h"
#include "runtime/hash.h"
#include "runtime/lock.h"

#define MAGIC 0x3150435255504848ull /* "HHPURCP1" */
/* 2: groups may end with a row op; 3: the row op may be a reduction,
 * operands may broadcast; 4-7: op codes renumbered (ops added); 8: the
 * checksum covers the header and the signature too; 9: op codes renumbered
 * (the pointwise tail, the special functions); 10: op codes renumbered (the
 * vision family's adaptive max pooling, max unpooling, im2col / col2im; the
 * tail family's searchsorted and histogram); 11: a signature names an
 * input's latest overlapping writer, and dead outputs include those a later
 * output covers. */
#define VERSION 11

typedef struct header {
  uint64_t magic;
  uint32_t version, num_nodes;
  uint64_t hash, sig_len;
  int32_t num_groups, fused_nodes, dropped_stores, group_size; /* num_groups < 0: no plan */
  uint64_t sum; /* FNV-1a of this header (with sum = 0) and of everything after it */
} header_t;

static _Atomic int configured; /* 1: the setting was read and valid */
static hpu_mutex_t cfg_mu = HPU_MUTEX_INIT(HPU_RANK_DISK_SETTINGS, "recipe disk settings");
static char dir[900];
static int64_t max_bytes, used_bytes;
static hpu_mutex_t mu = HPU_MUTEX_INIT(HPU_RANK_RECIPE, "recipe disk cache");

#define SETTING "PT_HPU_RECIPE_CACHE_CONFIG"

static hpu_status_t parse_flag(const char *s, int *out) {
  if (!*s || !strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no")) *out = 0;
  else if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes")) *out = 1;
  else
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "invalid delete flag of " SETTING "='%.200s': expected true or false", s);
  return HPU_SUCCESS;
}

/* Splits dir[,delete[,max MB]] (empty fields take their default). */
static hpu_status_t parse_config(const char *cfg, char *path, size_t path_len, int *del, long long *mb) {
  char buf[1200];
  if (strlen(cfg) >= sizeof buf || strlen(cfg) >= path_len)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, SETTING " is too long (%zu characters)", strlen(cfg));
  snprintf(buf, sizeof buf, "%s", cfg);
  char *field[3] = {buf, NULL, NULL};
  int nf = 1;
  for (char *c = buf; (c = strchr(c, ',')); ) {
    if (nf == 3)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "invalid " SETTING "='%.200s': expected dir[,true|false[,max MB]]", cfg);
    *c++ = 0;
    field[nf++] = c;
  }
  *del = 0;
  *mb = 0;
  hpu_status_t st = field[1] ? parse_flag(field[1], del) : HPU_SUCCESS;
  if (st == HPU_SUCCESS && field[2] && *field[2])
    st = hpu_parse_int("max MB of " SETTING, field[2], 0, 1LL << 24, mb);
  memcpy(path, field[0], strlen(field[0]) + 1); /* shorter than cfg, which fits */
  return st;
}

static int is_recipe_name(const char *name) {
  size_t len = strlen(name);
  return len >= 8 && strcmp(name + len - 7, ".recipe") == 0;
}

hpu_status_t hpu_recipe_disk_configure(void) {
  if (atomic_load(&configured)) return HPU_SUCCESS;
  hpu_mutex_lock(&cfg_mu);
  hpu_status_t st = HPU_SUCCESS;
  if (!atomic_load(&configured)) {
    const char *cfg = getenv(SETTING);
    char path[sizeof dir];
    int del = 0;
    long long mb = 0;
    path[0] = 0;
    if (cfg && *cfg) st = parse_config(cfg, path, sizeof path, &del, &mb);
    if (st == HPU_SUCCESS && path[0]) {
      struct stat sb;
      if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "[habana_torch] " SETTING ": cannot create %s: %s; recipes stay in memory\n",
                path, strerror(errno));
      } else if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "[habana_torch] " SETTING ": %s is not a directory; recipes stay in memory\n", path);
      } else {
        snprintf(dir, sizeof dir, "%s", path);
        max_bytes = (int64_t)mb << 20;
      }
    }
    DIR *d = st == HPU_SUCCESS && dir[0] ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
      if (!is_recipe_name(e->d_name)) continue;
      char file[1200];
      snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
      struct stat fs;
      if (del) unlink(file);
      else if (lstat(file, &fs) == 0 && S_ISREG(fs.st_mode)) used_bytes += fs.st_size;
    }
    if (d) closedir(d);
    if (st == HPU_SUCCESS) atomic_store(&configured, 1);
  }
  hpu_mutex_unlock(&cfg_mu);
  return st;
}

int hpu_recipe_disk_enabled(void) {
  /* A bad setting is reported by hpu_init; until it is fixed, no disk. */
  if (!atomic_load_explicit(&configured, memory_order_acquire) && hpu_recipe_disk_configure() != HPU_SUCCESS)
    return 0;
  return dir[0] != '\0';
}

static void file_of(uint64_t hash, char *out, size_t len) {
  snprintf(out, len, "%s/%016llx.recipe", dir, (unsigned long long)hash);
}

static uint64_t checksum(header_t h, const void *payload, size_t len) {
  h.sum = 0;
  return hpu_fnv1a(hpu_fnv1a(HPU_FNV1A_SEED, &h, sizeof h), payload, len);
}

/* The payload's size for a header that passed the count checks. */
static size_t payload_bytes(const header_t *h) {
  size_t b = (size_t)h->sig_len * sizeof(int64_t);
  if (h->num_groups >= 0)
    b += (size_t)h->num_nodes * sizeof(int) + (size_t)h->num_groups * sizeof(hpu_fused_group_t);
  return b;
}

static int reject(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int reject(const char *file, const char *fmt, ...) {
  char why[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[habana_torch] recipe cache: ignoring %s: %s; compiling the graph instead\n", file, why);
  hpu_metric_add("recipe_cache_disk_rejected", 1);
  return 0;
}

static int read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    p += r;
    len -= (size_t)r;
  }
  return 1;
}

/* Checks the file open at fd against the graph; on success sets *plan. */
static int load_fd(int fd, const char *file, const hpu_signature_t *sig, const hpu_node_t *nodes,
                   const uint8_t *dead, hpu_plan_t **plan) {
  struct stat st;
  if (fstat(fd, &st) != 0) return reject(file, "fstat: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) return reject(file, "not a regular file");
  header_t h;
  if ((size_t)st.st_size < sizeof h || !read_all(fd, &h, sizeof h))
    return reject(file, "truncated: %lld bytes, shorter than a header", (long long)st.st_size);
  if (h.magic != MAGIC) return reject(file, "not a recipe file (bad magic)");
  if (h.version != VERSION) return reject(file, "format version %u, this build reads %u", h.version, VERSION);
  if (h.group_size != (int32_t)sizeof(hpu_fused_group_t))
    return reject(file, "written by a build with another plan layout");
  int n = sig->num_nodes;
  if (h.hash != sig->hash || h.sig_len != sig->len || h.num_nodes != (uint32_t)n)
    return reject(file, "header is not that of this graph (hash, signature length or node count)");
  if (h.num_groups < -1 || h.num_groups > n)
    return reject(file, "%d fusion groups for %d nodes", h.num_groups, n);
  if (h.num_groups < 0 && (h.fused_nodes || h.dropped_stores))
    return reject(file, "counts set on a recipe without a plan");
  size_t len = payload_bytes(&h);
  if ((uint64_t)st.st_size != sizeof h + len)
    return reject(file, "%lld bytes where its header implies %zu (truncated or padded)",
                  (long long)st.st_size, sizeof h + len);
  char *payload = malloc(len ? len : 1);
  if (!payload) return 0; /* host OOM: a plain miss */
  int ok = read_all(fd, payload, len);
  if (!ok) {
    free(payload);
    return reject(file, "read failed: %s", strerror(errno));
  }
  if (checksum(h, payload, len) != h.sum) {
    free(payload);
    return reject(file, "checksum mismatch (damaged)");
  }
  if (memcmp(payload, sig->words, sig->len * sizeof(int64_t)) != 0) {
    free(payload);
    return reject(file, "signature differs: another graph with the same hash");
  }
  hpu_plan_t *p = NULL;
  if (h.num_groups >= 0) {
    p = calloc(1, sizeof *p);
    if (p) {
      p->num_nodes = n;
      p->num_groups = h.num_groups;
      p->fused_nodes = h.fused_nodes;
      p->dropped_stores = h.dropped_stores;
      p->group_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->group_of);
      p->groups = malloc((size_t)(h.num_groups > 0 ? h.num_groups : 1) * sizeof *p->groups);
    }
    if (!p || !p->group_of || !p->groups) {
      hpu_plan_free(p);
      free(payload);
      return 0;
    }
    const char *at = payload + sig->len * sizeof(int64_t);
    memcpy(p->group_of, at, (size_t)n * sizeof *p->group_of);
    memcpy(p->groups, at + (size_t)n * sizeof *p->group_of, (size_t)h.num_groups * sizeof *p->groups);
    char why[200];
    if (!hpu_plan_check(p, nodes, n, dead, why, sizeof why)) {
      hpu_plan_free(p);
      free(payload);
      return reject(file, "plan does not fit the graph: %s", why);
    }
  }
  free(payload);
  *plan = p;
  return 1;
}

int hpu_recipe_disk_load(const hpu_signature_t *sig, const hpu_node_t *nodes, const uint8_t *dead,
                         hpu_plan_t **plan) {
  *plan = NULL;
  if (!hpu_recipe_disk_enabled()) return 0;
  char file[1200];
  file_of(sig->hash, file, sizeof file);
  /* O_NONBLOCK: a FIFO planted under the name must not block the open. */
  int fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0; /* a plain miss */
    if (errno == ELOOP) return reject(file, "a symbolic link");
    return reject(file, "cannot open: %s", strerror(errno));
  }
  int ok = load_fd(fd, file, sig, nodes, dead, plan);
  close(fd);
  if (ok) hpu_metric_add("recipe_cache_disk_hit", 1);
  return ok;
}

/* 16 hex digits nobody can predict (the kernel's random source; the
 * clock, pid and a counter if it is unavailable, O_EXCL still holds). */
static void random_tag(char out[17]) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    static _Atomic uint64_t counter;
    uint64_t now = hpu_now_ns();
    r = hpu_fnv1a(HPU_FNV1A_SEED, &now, sizeof now) ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&counter, 1);
  }
  snprintf(out, 17, "%016llx", (unsigned long long)r);
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    p += w;
    len -= (size_t)w;
  }
  return 1;
}

void hpu_recipe_disk_store(const hpu_signature_t *sig, const hpu_plan_t *plan) {
  if (!hpu_recipe_disk_enabled()) return;
  int n = sig->num_nodes;
  header_t h = {MAGIC, VERSION, (uint32_t)n, sig->hash, sig->len,
                plan ? plan->num_groups : -1, plan ? plan->fused_nodes : 0,
                plan ? plan->dropped_stores : 0, (int32_t)sizeof(hpu_fused_group_t), 0};
  size_t len = payload_bytes(&h);
  hpu_mutex_lock(&mu);
  int room = max_bytes <= 0 || used_bytes + (int64_t)(sizeof h + len) <= max_bytes;
  if (room) used_bytes += (int64_t)(sizeof h + len);
  hpu_mutex_unlock(&mu);
  if (!room) {
    hpu_metric_add("recipe_cache_disk_full", 1);
    return;
  }
  char *buf = malloc(sizeof h + len);
  if (!buf) return;
  char *at = buf + sizeof h;
  memcpy(at, sig->words, sig->len * sizeof(int64_t));
  at += sig->len * sizeof(int64_t);
  if (plan) {
    memcpy(at, plan->group_of, (size_t)n * sizeof *plan->group_of);
    memcpy(at + (size_t)n * sizeof *plan->group_of, plan->groups, (size_t)plan->num_groups * sizeof *plan->groups);
  }
  h.sum = checksum(h, buf + sizeof h, len);
  memcpy(buf, &h, sizeof h);
  char file[1200], tmp[1300], tag[17];
  file_of(sig->hash, file, sizeof file);
  random_tag(tag);
  snprintf(tmp, sizeof tmp, "%s.%s.tmp", file, tag);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    free(buf);
    return;
  }
  int ok = write_all(fd, buf, sizeof h + len);
  ok = close(fd) == 0 && ok;
  free(buf);
  if (ok && rename(tmp, file) == 0) {
    hpu_metric_add("recipe_cache_disk_store", 1);
  } else {
    unlink(tmp);
  }
}
