/* The status page (hpu/status_page.h) as another process sees it: the test
 * maps the shared memory object by name, read-only, as hl-smi does, and
 * checks what the runtime's own paths (allocator, queue, submit, metrics,
 * the collective hook) wrote there; then stale pages: of a pid that does
 * not exist, of a reused pid (same pid, other start time), and a page of a
 * living process still being created, which must be left alone. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hpu/hpu.h"
#include "hpu/status_page.h"

#define MiB ((size_t)1 << 20)

static const hpu_status_page_t *view; /* our page, mapped a second time, read-only */

static const hpu_status_page_t *map_page(int pid) {
  char name[96];
  hpu_status_page_name(name, sizeof name, pid);
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0) return NULL;
  void *p = mmap(NULL, sizeof(hpu_status_page_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

static uint64_t ld(const uint64_t *field) { return __atomic_load_n(field, __ATOMIC_RELAXED); }

static void test_create(void) {
  CU_ASSERT_EQUAL_FATAL(hpu_init(), HPU_SUCCESS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(hpu_status_page_get());
  view = map_page(getpid());
  CU_ASSERT_PTR_NOT_NULL_FATAL(view);
  CU_ASSERT_EQUAL(view->magic, HPU_STATUS_PAGE_MAGIC);
  CU_ASSERT_EQUAL(view->version, HPU_STATUS_PAGE_VERSION);
  CU_ASSERT_EQUAL(view->pid, getpid());
  CU_ASSERT_EQUAL(view->start_time, hpu_status_page_process_start(getpid()));
  CU_ASSERT_NOT_EQUAL(view->start_time, 0);
  CU_ASSERT_EQUAL(view->num_cards, 4); /* HPU_NUM_CARDS=4, set in main */
  CU_ASSERT_EQUAL(view->card_bytes, sizeof(hpu_status_card_t));
  CU_ASSERT_EQUAL(view->cards[3].physical_id, 3);
  CU_ASSERT_EQUAL(view->cards[1].memory_total, 64 * MiB);
  CU_ASSERT_PTR_NOT_NULL(strstr(view->name, "test_status_page"));
  /* Private to the user. */
  char path[128];
  snprintf(path, sizeof path, "/dev/shm/" HPU_STATUS_PAGE_PREFIX "%u.%d", (unsigned)getuid(), getpid());
  struct stat sb;
  CU_ASSERT_EQUAL_FATAL(stat(path, &sb), 0);
  CU_ASSERT_EQUAL(sb.st_mode & 0777, 0600);
  CU_ASSERT_FALSE(hpu_status_page_is_stale(path + strlen("/dev/shm/")));
}

static void test_memory(void) {
  void *a = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(1, 3 * MiB, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(ld(&view->cards[1].memory_used), 3 * MiB);
  CU_ASSERT_TRUE(ld(&view->cards[1].memory_reserved) >= 3 * MiB);
  CU_ASSERT_EQUAL(ld(&view->cards[0].memory_used), 0);
  CU_ASSERT_EQUAL(hpu_free(1, a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(ld(&view->cards[1].memory_used), 0);
  CU_ASSERT_EQUAL(ld(&view->cards[1].memory_peak), 3 * MiB);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(1), HPU_SUCCESS);
  CU_ASSERT_EQUAL(ld(&view->cards[1].memory_reserved), 0);
}

static hpu_status_t sleep_task(void *arg) {
  (void)arg;
  struct timespec ts = {0, 5 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return HPU_SUCCESS;
}

static void test_queue(void) {
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(2, &s), HPU_SUCCESS);
  uint64_t busy0 = ld(&view->cards[2].busy_ns), launches0 = ld(&view->cards[2].launches);
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, NULL, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_TRUE(ld(&view->cards[2].busy_ns) - busy0 >= 15u * 1000 * 1000);
  CU_ASSERT_EQUAL(ld(&view->cards[2].launches) - launches0, 3);
  CU_ASSERT_EQUAL(ld(&view->cards[2].queue_depth), 0);
  CU_ASSERT_EQUAL(ld(&view->cards[3].busy_ns), 0);
}

static void test_copies(void) {
  float host[256] = {0}, back[256];
  void *dev = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, sizeof host, &dev), HPU_SUCCESS);
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  int64_t n = 256;
  hpu_node_t node;
  memset(&node, 0, sizeof node);
  node.op = HPU_OP_COPY;
  node.num_inputs = node.num_outputs = 1;
  node.compute_dtype = HPU_FLOAT32;
  uint64_t k0 = ld(&view->cards[0].kernels);
  hpu_tensor_init_contiguous(&node.inputs[0], host, HPU_FLOAT32, 1, &n);
  hpu_tensor_init_contiguous(&node.outputs[0], dev, HPU_FLOAT32, 1, &n);
  CU_ASSERT_EQUAL(hpu_submit(s, &node), HPU_SUCCESS);
  hpu_tensor_init_contiguous(&node.inputs[0], dev, HPU_FLOAT32, 1, &n);
  hpu_tensor_init_contiguous(&node.outputs[0], back, HPU_FLOAT32, 1, &n);
  CU_ASSERT_EQUAL(hpu_submit(s, &node), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(ld(&view->cards[0].copy_bytes[HPU_COPY_H2D]), sizeof host);
  CU_ASSERT_EQUAL(ld(&view->cards[0].copy_bytes[HPU_COPY_D2H]), sizeof host);
  CU_ASSERT_EQUAL(ld(&view->cards[0].copy_bytes[HPU_COPY_D2D]), 0);
  CU_ASSERT_EQUAL(ld(&view->cards[0].kernels) - k0, 2);
  CU_ASSERT_EQUAL(hpu_free(0, dev), HPU_SUCCESS);
}

static void test_counters(void) {
  hpu_metric_add("cpu_fallback::aten::frobnicate", 2);
  hpu_metric_add("cpu_fallback::aten::frobnicate", 1);
  hpu_metric_add("cpu_fallback::aten::other", 1);
  hpu_metric_add("graph_compilation", 1);
  hpu_metric_add("recipe_cache_hit", 5); /* not mirrored */
  CU_ASSERT_EQUAL(ld(&view->cpu_fallbacks), 4);
  CU_ASSERT_TRUE(ld(&view->graph_compilations) >= 1);
  int found = 0;
  for (int i = 0; i < HPU_STATUS_FALLBACK_SLOTS; i++) {
    if (!strcmp(view->fallbacks[i].op, "aten::frobnicate")) found += ld(&view->fallbacks[i].count) == 3;
    if (!strcmp(view->fallbacks[i].op, "aten::other")) found += ld(&view->fallbacks[i].count) == 1;
  }
  CU_ASSERT_EQUAL(found, 2);
  hpu_status_page_collective(1, HPU_COLL_ALLREDUCE, 4096);
  hpu_status_page_collective(1, HPU_COLL_ALLREDUCE, 4096);
  hpu_status_page_collective(-1, HPU_COLL_ALLREDUCE, 4096); /* no card: ignored */
  CU_ASSERT_EQUAL(ld(&view->cards[1].coll_bytes[HPU_COLL_ALLREDUCE]), 8192);
}

/* Writes a page for pid as its process would (complete unless magic is 0). */
static int fake_page(int pid, uint64_t start_time, uint64_t magic, char *name, size_t len) {
  char shm[96];
  hpu_status_page_name(shm, sizeof shm, pid);
  snprintf(name, len, "%s", shm + 1);
  int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return -1;
  hpu_status_page_t *p = MAP_FAILED;
  if (ftruncate(fd, sizeof *p) == 0) p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return -1;
  p->pid = pid;
  p->start_time = start_time;
  p->magic = magic;
  munmap(p, sizeof *p);
  return 0;
}

static int page_exists(const char *name) {
  char path[160];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  return access(path, F_OK) == 0;
}

static void test_stale(void) {
  char name[96];
  /* A pid with no process. */
  int dead = 0;
  for (int pid = 4000000; pid > 1000; pid--)
    if (!hpu_status_page_process_start(pid)) {
      dead = pid;
      break;
    }
  CU_ASSERT_FATAL(dead > 0);
  CU_ASSERT_EQUAL_FATAL(fake_page(dead, 12345, HPU_STATUS_PAGE_MAGIC, name, sizeof name), 0);
  CU_ASSERT_TRUE(hpu_status_page_is_stale(name));
  CU_ASSERT_TRUE(hpu_status_page_clean_stale() >= 1);
  CU_ASSERT_FALSE(page_exists(name));

  /* The pid lives (our parent) but was started at another time: reused. */
  int parent = getppid();
  uint64_t started = hpu_status_page_process_start(parent);
  CU_ASSERT_FATAL(started > 0);
  CU_ASSERT_EQUAL_FATAL(fake_page(parent, started + 1, HPU_STATUS_PAGE_MAGIC, name, sizeof name), 0);
  CU_ASSERT_TRUE(hpu_status_page_is_stale(name));
  hpu_status_page_clean_stale();
  CU_ASSERT_FALSE(page_exists(name));

  /* The same pid and start time: the page is live. */
  CU_ASSERT_EQUAL_FATAL(fake_page(parent, started, HPU_STATUS_PAGE_MAGIC, name, sizeof name), 0);
  CU_ASSERT_FALSE(hpu_status_page_is_stale(name));
  hpu_status_page_clean_stale();
  CU_ASSERT_TRUE(page_exists(name));
  char shm[100];
  snprintf(shm, sizeof shm, "/%s", name);
  shm_unlink(shm);

  /* A living process's page without its magic yet is being created. */
  CU_ASSERT_EQUAL_FATAL(fake_page(parent, 0, 0, name, sizeof name), 0);
  CU_ASSERT_FALSE(hpu_status_page_is_stale(name));
  shm_unlink(shm);

  /* Our own page survives a clean-up. */
  hpu_status_page_clean_stale();
  CU_ASSERT_TRUE(map_page(getpid()) != NULL);
}

int main(void) {
  setenv("HPU_NUM_CARDS", "4", 1);
  setenv("HPU_CARD_MEMORY", "64M", 1);
  unsetenv("HPU_STATUS_PAGE");
  unsetenv("HABANA_VISIBLE_DEVICES");
  unsetenv("HABANA_VISIBLE_MODULES");
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("status page", NULL, NULL);
  CU_add_test(s, "created at init, private, describes the process", test_create);
  CU_add_test(s, "allocator: used, reserved, peak", test_memory);
  CU_add_test(s, "queue: busy time, launches, depth", test_queue);
  CU_add_test(s, "submit: kernels, copy bytes by direction", test_copies);
  CU_add_test(s, "fallbacks, compilations, collective bytes", test_counters);
  CU_add_test(s, "stale pages are recognised and cleaned", test_stale);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
