/* Recipes persisted on disk, as Gaudi's PT_HPU_RECIPE_CACHE_CONFIG:
 *
 *   PT_HPU_RECIPE_CACHE_CONFIG=<dir>[,<delete at start: true|false>[,<max MB>]]
 *
 * Each compiled recipe is a file <dir>/<hash>.recipe holding the graph
 * signature it was compiled for and its plan; another process running the
 * same graphs loads it instead of compiling. A file is used only when its
 * whole signature equals the graph's and every plan field is in range: a
 * stale, truncated or foreign file is ignored (and counted), never trusted.
 * Writes go to a temporary file renamed into place, so concurrent processes
 * sharing the directory never see half a file. */
#include "graph/recipe_disk.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hpu/metrics.h"
#include "runtime/lock.h"

#define MAGIC 0x3150435255504848ull /* "HHPURCP1" */
/* 2: groups may end with a row op; 3: the row op may be a reduction,
 * operands may broadcast; 4-7: op codes renumbered (ops added). */
#define VERSION 7

typedef struct header {
  uint64_t magic;
  uint32_t version, num_nodes;
  uint64_t hash, sig_len;
  int32_t num_groups, fused_nodes, dropped_stores, group_size; /* num_groups < 0: no plan */
  uint64_t plan_sum; /* of the plan's bytes: a damaged plan is not run */
} header_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char dir[900];
static int64_t max_bytes, used_bytes;
static hpu_mutex_t mu = HPU_MUTEX_INIT(HPU_RANK_RECIPE, "recipe disk cache");

static int truthy(const char *s) {
  return strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0;
}

static void configure(void) {
  const char *cfg = getenv("PT_HPU_RECIPE_CACHE_CONFIG");
  if (!cfg || !*cfg) return;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", cfg);
  char *save = NULL, *path = strtok_r(buf, ",", &save);
  char *del = strtok_r(NULL, ",", &save), *mb = strtok_r(NULL, ",", &save);
  if (!path || !*path) return;
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "[habana_torch] PT_HPU_RECIPE_CACHE_CONFIG: cannot create %s: %s; recipes stay in memory\n",
            path, strerror(errno));
    return;
  }
  snprintf(dir, sizeof dir, "%s", path);
  max_bytes = mb ? strtoll(mb, NULL, 10) * 1024 * 1024 : 0;
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".recipe") != 0) continue;
    char file[1200];
    snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
    struct stat st;
    if (del && truthy(del)) unlink(file);
    else if (stat(file, &st) == 0) used_bytes += st.st_size;
  }
  closedir(d);
}

int hpu_recipe_disk_enabled(void) {
  pthread_once(&once, configure);
  return dir[0] != '\0';
}

static void file_of(uint64_t hash, char *out, size_t len) {
  snprintf(out, len, "%s/%016llx.recipe", dir, (unsigned long long)hash);
}

static uint64_t checksum(uint64_t h, const void *data, size_t len) {
  const unsigned char *b = data;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static uint64_t plan_sum(const hpu_plan_t *p) {
  uint64_t h = checksum(1469598103934665603ull, p->group_of, (size_t)p->num_nodes * sizeof *p->group_of);
  return checksum(h, p->groups, (size_t)p->num_groups * sizeof *p->groups);
}

/* Ranges the executor relies on for memory safety; the checksum and the
 * signature vouch for the rest. */
static int plan_valid(const hpu_plan_t *p, int n) {
  if (p->num_nodes != n || p->num_groups < 1 || p->num_groups > n) return 0;
  for (int i = 0; i < n; i++)
    if (p->group_of[i] < -1 || p->group_of[i] >= p->num_groups) return 0;
  for (int g = 0; g < p->num_groups; g++) {
    const hpu_fused_group_t *fg = &p->groups[g];
    int rows = fg->rows_node >= 0;
    if (fg->first < 0 || fg->count < 2 - rows || fg->count > HPU_FUSION_MAX_GROUP ||
        fg->first + fg->count + rows > n)
      return 0;
    if (rows && (fg->rows_node != fg->first + fg->count || p->group_of[fg->rows_node] != g ||
                 fg->feeder < 0 || fg->feeder >= fg->count || fg->row_len <= 0 ||
                 fg->numel % fg->row_len))
      return 0;
    if (!rows && fg->rows_node != -1) return 0;
    for (int m = 0; m < fg->count; m++) {
      if (p->group_of[fg->first + m] != g) return 0;
      for (int k = 0; k < HPU_MAX_INPUTS; k++)
        if (fg->src[m][k] < -1 || fg->src[m][k] >= fg->count) return 0;
    }
  }
  return 1;
}

int hpu_recipe_disk_load(const hpu_signature_t *sig, hpu_plan_t **plan) {
  *plan = NULL;
  if (!hpu_recipe_disk_enabled()) return 0;
  char file[1200];
  file_of(sig->hash, file, sizeof file);
  FILE *f = fopen(file, "rb");
  if (!f) return 0;
  header_t h;
  int64_t *words = NULL;
  hpu_plan_t *p = NULL;
  int ok = fread(&h, sizeof h, 1, f) == 1 && h.magic == MAGIC && h.version == VERSION &&
           h.hash == sig->hash && h.sig_len == sig->len && (int)h.num_nodes == sig->num_nodes &&
           h.group_size == (int32_t)sizeof(hpu_fused_group_t);
  if (ok) {
    words = malloc(sig->len * sizeof *words);
    ok = words && fread(words, sizeof *words, sig->len, f) == sig->len &&
         memcmp(words, sig->words, sig->len * sizeof *words) == 0;
  }
  if (ok && h.num_groups >= 0) {
    p = calloc(1, sizeof *p);
    int n = (int)h.num_nodes;
    ok = p && h.num_groups <= n;
    if (ok) {
      p->num_nodes = n;
      p->num_groups = h.num_groups;
      p->fused_nodes = h.fused_nodes;
      p->dropped_stores = h.dropped_stores;
      p->group_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->group_of);
      p->groups = malloc((size_t)(h.num_groups > 0 ? h.num_groups : 1) * sizeof *p->groups);
      ok = p->group_of && p->groups &&
           fread(p->group_of, sizeof *p->group_of, (size_t)n, f) == (size_t)n &&
           fread(p->groups, sizeof *p->groups, (size_t)h.num_groups, f) == (size_t)h.num_groups &&
           plan_valid(p, n) && plan_sum(p) == h.plan_sum;
    }
  }
  fclose(f);
  free(words);
  if (!ok) {
    hpu_plan_free(p);
    hpu_metric_add("recipe_cache_disk_rejected", 1);
    return 0;
  }
  *plan = p;
  hpu_metric_add("recipe_cache_disk_hit", 1);
  return 1;
}

void hpu_recipe_disk_store(const hpu_signature_t *sig, const hpu_plan_t *plan) {
  if (!hpu_recipe_disk_enabled()) return;
  int n = sig->num_nodes;
  int64_t bytes = (int64_t)(sizeof(header_t) + sig->len * sizeof(int64_t));
  if (plan) bytes += (int64_t)(n * sizeof(int) + (size_t)plan->num_groups * sizeof(hpu_fused_group_t));
  hpu_mutex_lock(&mu);
  int room = max_bytes <= 0 || used_bytes + bytes <= max_bytes;
  if (room) used_bytes += bytes;
  hpu_mutex_unlock(&mu);
  if (!room) {
    hpu_metric_add("recipe_cache_disk_full", 1);
    return;
  }
  header_t h = {MAGIC, VERSION, (uint32_t)n, sig->hash, sig->len,
                plan ? plan->num_groups : -1, plan ? plan->fused_nodes : 0,
                plan ? plan->dropped_stores : 0, (int32_t)sizeof(hpu_fused_group_t),
                plan ? plan_sum(plan) : 0};
  char file[1200], tmp[1300];
  file_of(sig->hash, file, sizeof file);
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", file, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  int ok = fwrite(&h, sizeof h, 1, f) == 1 &&
           fwrite(sig->words, sizeof *sig->words, sig->len, f) == sig->len;
  if (ok && plan)
    ok = fwrite(plan->group_of, sizeof *plan->group_of, (size_t)n, f) == (size_t)n &&
         fwrite(plan->groups, sizeof *plan->groups, (size_t)plan->num_groups, f) ==
             (size_t)plan->num_groups;
  ok = fclose(f) == 0 && ok;
  if (ok && rename(tmp, file) == 0) {
    hpu_metric_add("recipe_cache_disk_store", 1);
  } else {
    unlink(tmp);
  }
}
