/* The on-disk recipe cache (PT_HPU_RECIPE_CACHE_CONFIG) against damaged and
 * hostile files. A real recipe is stored for a graph with two fusion groups
 * (one ending in a row reduction) around a node that does not fuse; it
 * loads and runs to the same bytes as the nodes one by one. Then every
 * truncation, a bit flip in every byte, plans whose checksum was recomputed
 * but whose bounds or grouping are wrong (the planner would never make
 * them), a symbolic link and a FIFO in its place: each must be refused (a
 * cache miss), named on stderr with a reason, and counted. Writing must not
 * follow a link planted where a temporary file could be guessed. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/fusion.h"
#include "graph/recipe_disk.h"
#include "graph/signature.h"
#include "hpu/hpu.h"
#include "test_nodes.h"

enum { R = 37, N = 300, NODES = 6 };

static char base[64], dir[128], file[256], log_path[160];

/* ---- the graph ---- */

typedef struct {
  float x[R * N], mask[N], t[5][R * N], sum[R];
} bufs_t;

/* Group 0: (x * 0.125 + mask).sum(-1); node 3: x // 3 (floor division does
 * not fuse); group 1: x * x - mask. */
static void build(hpu_node_t *nodes, bufs_t *b) {
  hpu_tensor_t x = T2(b->x, HPU_FLOAT32, R, N), mask = T1(b->mask, HPU_FLOAT32, N), t[5];
  for (int k = 0; k < 5; k++) t[k] = T2(b->t[k], HPU_FLOAT32, R, N);
  nodes[0] = arith_node(HPU_OP_MUL, t[0], x, NULL, 0.125);
  nodes[1] = arith_node(HPU_OP_ADD, t[1], t[0], &mask, 0);
  hpu_node_t *r = &nodes[2];
  memset(r, 0, sizeof *r);
  r->op = HPU_OP_REDUCE;
  r->num_inputs = 1;
  r->inputs[0] = t[1];
  r->num_outputs = 1;
  r->outputs[0] = T2(b->sum, HPU_FLOAT32, R, 1);
  r->outputs[0].strides[1] = 0;
  r->compute_dtype = HPU_FLOAT32;
  r->params.nn.i[0] = HPU_REDUCE_SUM;
  r->params.nn.i[1] = 2;
  nodes[3] = arith_node(HPU_OP_DIV, t[2], x, NULL, 3.0);
  nodes[3].params.binary.rounding = HPU_ROUND_FLOOR;
  nodes[4] = arith_node(HPU_OP_MUL, t[3], x, &x, 0);
  nodes[5] = arith_node(HPU_OP_SUB, t[4], t[3], &mask, 0);
  for (int i = 0; i < NODES; i++) CU_ASSERT_EQUAL(hpu_node_validate(&nodes[i]), HPU_SUCCESS);
}

/* t0, t1 and t3 are temporaries; the sum, x // 3 and the last result are kept. */
static const uint8_t dead[NODES] = {1, 1, 0, 0, 1, 0};

static bufs_t *bufs;
static hpu_node_t nodes[NODES];
static hpu_signature_t sig;

static void fill(bufs_t *b) {
  uint32_t s = 12345;
  for (int i = 0; i < R * N; i++) b->x[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / (1 << 24) * 8 - 4;
  for (int i = 0; i < N; i++) b->mask[i] = (float)(i % 7) - 3;
}

/* ---- files ---- */

/* The file format (csrc/graph/recipe_disk.c): a header, the signature's
 * words, group_of[num_nodes], groups[num_groups]; sum is FNV-1a over the
 * header with sum = 0, then the rest. */
typedef struct {
  uint64_t magic;
  uint32_t version, num_nodes;
  uint64_t hash, sig_len;
  int32_t num_groups, fused_nodes, dropped_stores, group_size;
  uint64_t sum;
} file_header_t;

static uint64_t fnv(uint64_t h, const void *data, size_t len) {
  const unsigned char *b = data;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Recomputes the checksum, as someone crafting a file would. */
static void reseal(unsigned char *buf, size_t len) {
  file_header_t h;
  memcpy(&h, buf, sizeof h);
  h.sum = 0;
  h.sum = fnv(fnv(1469598103934665603ull, &h, sizeof h), buf + sizeof h, len - sizeof h);
  memcpy(buf, &h, sizeof h);
}

static unsigned char *good; /* the valid file's bytes */
static size_t good_len;

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, f);
  b[*len] = 0;
  fclose(f);
  return b;
}

static void write_file(const char *path, const void *data, size_t len) {
  unlink(path);
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
  fclose(f);
}

/* Loads with stderr captured; returns what the loader said. */
static char *load_logged(int *loaded, hpu_plan_t **plan) {
  fflush(stderr);
  int saved = dup(2);
  int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
  *loaded = hpu_recipe_disk_load(&sig, nodes, dead, plan);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  size_t len;
  return (char *)read_file(log_path, &len);
}

/* The file at `file` must be refused: a miss, counted, and one stderr line
 * naming it with `why` in the reason. Returns 1 when all held. */
static int refused(const char *why) {
  int64_t before = hpu_metric_get("recipe_cache_disk_rejected");
  hpu_plan_t *plan = NULL;
  int loaded;
  char *log = load_logged(&loaded, &plan);
  int ok = !loaded && !plan && hpu_metric_get("recipe_cache_disk_rejected") == before + 1 &&
           log && strstr(log, file) && strstr(log, why);
  if (!ok) fprintf(stdout, "\n  not refused as '%s': loaded=%d, log: %s", why, loaded, log ? log : "(none)");
  hpu_plan_free(plan);
  free(log);
  return ok;
}

static int suite_init(void) {
  snprintf(base, sizeof base, "/tmp/hpu-recipe-test-XXXXXX");
  if (!mkdtemp(base)) return 1;
  snprintf(dir, sizeof dir, "%s/recipes", base);
  snprintf(log_path, sizeof log_path, "%s/stderr.log", base);
  setenv("PT_HPU_RECIPE_CACHE_CONFIG", dir, 1);
  if (hpu_init() != HPU_SUCCESS) return 1;
  bufs = calloc(1, sizeof *bufs);
  fill(bufs);
  return 0;
}

static int suite_clean(void) {
  free(good);
  free(bufs);
  hpu_signature_free(&sig);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  return system(cmd) == 0 ? 0 : 1;
}

/* ---- tests ---- */

static void test_directory_is_private(void) {
  CU_ASSERT_TRUE_FATAL(hpu_recipe_disk_enabled());
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(lstat(dir, &st), 0);
  CU_ASSERT_TRUE(S_ISDIR(st.st_mode));
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0700);
}

static void test_round_trip_runs_right(void) {
  bufs_t *ref = calloc(1, sizeof *ref);
  fill(ref);
  build(nodes, ref);
  for (int i = 0; i < NODES; i++) CU_ASSERT_EQUAL(hpu_node_execute(&nodes[i]), HPU_SUCCESS);

  build(nodes, bufs);
  CU_ASSERT_TRUE_FATAL(hpu_signature_build(&sig, nodes, NODES, dead));
  hpu_plan_t *plan = hpu_plan_build(nodes, NODES, dead);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
  CU_ASSERT_EQUAL_FATAL(plan->num_groups, 2);
  CU_ASSERT_EQUAL(plan->groups[0].rows_node, 2);
  CU_ASSERT_EQUAL(plan->group_of[3], -1);
  CU_ASSERT_EQUAL(plan->groups[1].first, 4);
  hpu_recipe_disk_store(&sig, plan);
  snprintf(file, sizeof file, "%s/%016llx.recipe", dir, (unsigned long long)sig.hash);
  good = read_file(file, &good_len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(good);

  hpu_plan_t *loaded = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_recipe_disk_load(&sig, nodes, dead, &loaded), 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(loaded);
  CU_ASSERT_EQUAL(loaded->num_groups, plan->num_groups);
  CU_ASSERT_EQUAL(memcmp(loaded->group_of, plan->group_of, NODES * sizeof(int)), 0);
  CU_ASSERT_EQUAL(memcmp(loaded->groups, plan->groups, 2 * sizeof *plan->groups), 0);
  CU_ASSERT_EQUAL(hpu_plan_execute(loaded, nodes, NODES), HPU_SUCCESS);
  CU_ASSERT_EQUAL(memcmp(bufs->sum, ref->sum, sizeof ref->sum), 0);
  CU_ASSERT_EQUAL(memcmp(bufs->t[2], ref->t[2], sizeof ref->t[2]), 0);
  CU_ASSERT_EQUAL(memcmp(bufs->t[4], ref->t[4], sizeof ref->t[4]), 0);
  hpu_plan_free(loaded);
  hpu_plan_free(plan);
  free(ref);
}

static void test_truncated_files_are_refused(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(good);
  int bad = 0;
  for (size_t len = 0; len < good_len; len++) {
    write_file(file, good, len);
    bad += !refused(len < sizeof(file_header_t) ? "truncated" : "implies");
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* a byte too many */
  unsigned char *longer = malloc(good_len + 1);
  memcpy(longer, good, good_len);
  longer[good_len] = 0;
  write_file(file, longer, good_len + 1);
  CU_ASSERT_TRUE(refused("implies"));
  free(longer);
}

static void test_every_flipped_byte_is_refused(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(good);
  unsigned char *b = malloc(good_len);
  int bad = 0;
  uint32_t s = 99;
  for (size_t i = 0; i < good_len; i++) {
    memcpy(b, good, good_len);
    s = s * 1664525u + 1013904223u;
    b[i] ^= (unsigned char)(1u << (s >> 29)); /* one bit, chosen per byte */
    write_file(file, b, good_len);
    /* The header's own checks may see it first; whatever the reason, it
     * must be refused. */
    bad += !refused("");
  }
  CU_ASSERT_EQUAL(bad, 0);
  free(b);
}

/* Applies `edit` to a copy of the valid file's plan, reseals it, and expects
 * a refusal whose reason contains `why`. */
typedef void (*edit_fn)(file_header_t *h, int *group_of, hpu_fused_group_t *g);

static int hostile(edit_fn edit, const char *why) {
  unsigned char *b = malloc(good_len);
  memcpy(b, good, good_len);
  file_header_t h;
  memcpy(&h, b, sizeof h);
  int *group_of = (int *)(b + sizeof h + h.sig_len * 8);
  hpu_fused_group_t *g = malloc(2 * sizeof *g);
  memcpy(g, group_of + NODES, 2 * sizeof *g); /* may be unaligned in the file */
  int go[NODES];
  memcpy(go, group_of, sizeof go);
  edit(&h, go, g);
  memcpy(b, &h, sizeof h);
  memcpy(group_of, go, sizeof go);
  memcpy(group_of + NODES, g, 2 * sizeof *g);
  reseal(b, good_len);
  write_file(file, b, good_len);
  free(g);
  free(b);
  return refused(why);
}

static void numel_doubled(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].numel *= 2; }
static void numel_huge(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[1].numel = (int64_t)1 << 40; }
static void count_past_end(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[1].count = 3; }
static void first_past_end(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[1].first = 1000; }
static void first_negative(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].first = -5; }
static void group_of_past_groups(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)g; go[0] = 99; }
static void lone_node_in_group(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)g; go[3] = 1; }
static void nonfusible_member(file_header_t *h, int *go, hpu_fused_group_t *g) {
  (void)h;
  g[1].first = 3; /* x // 3, x * x, - mask */
  g[1].count = 3;
  go[3] = 1;
}
static void src_from_itself(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].src[1][0] = 1; }
static void src_past_members(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].src[0][0] = 31; }
static void live_store_dropped(file_header_t *h, int *go, hpu_fused_group_t *g) {
  (void)go;
  g[1].store[1] = 0; /* the kept result, x * x - mask */
  h->dropped_stores++;
}
static void feeder_past_members(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].feeder = 5; }
static void row_len_wrong(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].row_len = 7; }
static void row_op_removed(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)h, (void)go; g[0].rows_node = -1; }
static void counts_wrong(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)go, (void)g; h->fused_nodes = 40; }
static void groups_count_huge(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)go, (void)g; h->num_groups = 1000; }
static void no_plan_but_bytes(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)go, (void)g; h->num_groups = -1; }
static void version_other(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)go, (void)g; h->version++; }
static void nodes_other(file_header_t *h, int *go, hpu_fused_group_t *g) { (void)go, (void)g; h->num_nodes = 7; }

static void test_hostile_plans_are_refused(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(good);
  CU_ASSERT_TRUE(hostile(numel_doubled, "element count"));
  CU_ASSERT_TRUE(hostile(numel_huge, "element count"));
  CU_ASSERT_TRUE(hostile(count_past_end, "members"));
  CU_ASSERT_TRUE(hostile(first_past_end, "outside the graph"));
  CU_ASSERT_TRUE(hostile(first_negative, "outside the graph"));
  CU_ASSERT_TRUE(hostile(group_of_past_groups, "another group"));
  CU_ASSERT_TRUE(hostile(lone_node_in_group, "no group's range"));
  CU_ASSERT_TRUE(hostile(nonfusible_member, "does not fuse"));
  CU_ASSERT_TRUE(hostile(src_from_itself, "operand sources"));
  CU_ASSERT_TRUE(hostile(src_past_members, "operand sources"));
  CU_ASSERT_TRUE(hostile(live_store_dropped, "stored outputs"));
  CU_ASSERT_TRUE(hostile(feeder_past_members, "row length"));
  CU_ASSERT_TRUE(hostile(row_len_wrong, "row length"));
  CU_ASSERT_TRUE(hostile(row_op_removed, "row op"));
  CU_ASSERT_TRUE(hostile(counts_wrong, "counts"));
  CU_ASSERT_TRUE(hostile(groups_count_huge, "fusion groups"));
  CU_ASSERT_TRUE(hostile(no_plan_but_bytes, "without a plan"));
  CU_ASSERT_TRUE(hostile(version_other, "format version"));
  CU_ASSERT_TRUE(hostile(nodes_other, "not that of this graph"));

  /* Another graph's signature under this hash. */
  unsigned char *b = malloc(good_len);
  memcpy(b, good, good_len);
  b[sizeof(file_header_t) + 8] ^= 1;
  reseal(b, good_len);
  write_file(file, b, good_len);
  CU_ASSERT_TRUE(refused("signature differs"));
  free(b);

  /* The valid file still loads (the checks above refused the edits only). */
  write_file(file, good, good_len);
  hpu_plan_t *plan = NULL;
  CU_ASSERT_EQUAL(hpu_recipe_disk_load(&sig, nodes, dead, &plan), 1);
  hpu_plan_free(plan);
}

static void test_links_and_fifos_are_refused(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(good);
  char elsewhere[200];
  snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere.recipe", base);
  write_file(elsewhere, good, good_len); /* a valid recipe, reached through a link */
  unlink(file);
  CU_ASSERT_EQUAL_FATAL(symlink(elsewhere, file), 0);
  CU_ASSERT_TRUE(refused("symbolic link"));
  unlink(file);
  CU_ASSERT_EQUAL_FATAL(mkfifo(file, 0600), 0);
  alarm(20); /* opening a FIFO for reading must not block */
  CU_ASSERT_TRUE(refused("not a regular file"));
  alarm(0);
  unlink(file);
}

/* A link planted at the temporary name older builds used (<file>.<pid>.tmp)
 * must not redirect the write. */
static void test_store_does_not_follow_planted_links(void) {
  char victim[200], planted[400];
  snprintf(victim, sizeof victim, "%s/victim", base);
  write_file(victim, "keep", 4);
  snprintf(planted, sizeof planted, "%s.%d.tmp", file, (int)getpid());
  unlink(file);
  CU_ASSERT_EQUAL_FATAL(symlink(victim, planted), 0);
  hpu_plan_t *plan = hpu_plan_build(nodes, NODES, dead);
  hpu_recipe_disk_store(&sig, plan);
  hpu_plan_free(plan);
  size_t len;
  unsigned char *v = read_file(victim, &len);
  CU_ASSERT_TRUE(v && len == 4 && memcmp(v, "keep", 4) == 0);
  free(v);
  unsigned char *stored = read_file(file, &len);
  CU_ASSERT_TRUE(stored && len == good_len && memcmp(stored, good, len) == 0);
  free(stored);
  struct stat st;
  CU_ASSERT_EQUAL(lstat(file, &st), 0);
  CU_ASSERT_TRUE(S_ISREG(st.st_mode));
  unlink(planted);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("recipe files on disk", suite_init, suite_clean);
  CU_add_test(s, "a directory it creates is private", test_directory_is_private);
  CU_add_test(s, "a stored recipe loads and runs to the same bytes", test_round_trip_runs_right);
  CU_add_test(s, "every truncation is refused", test_truncated_files_are_refused);
  CU_add_test(s, "a flipped bit in any byte is refused", test_every_flipped_byte_is_refused);
  CU_add_test(s, "resealed plans with wrong bounds or grouping are refused", test_hostile_plans_are_refused);
  CU_add_test(s, "symbolic links and FIFOs are refused", test_links_and_fifos_are_refused);
  CU_add_test(s, "storing does not follow a planted link", test_store_does_not_follow_planted_links);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
