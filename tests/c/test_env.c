/* The one parser of numeric settings (hpu/env.h): each bad form is an
 * error whose message names the setting, quotes the value and gives the
 * range; good forms parse exactly. Then the settings read outside
 * hpu_init's own code (lazy mode, the recipe caches, the thread pool) make
 * hpu_init fail with that message, each case in a forked child since init
 * reads the environment once per process. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hpu/env.h"
#include "hpu/hpu.h"

static int has(const char *needle) { return strstr(hpu_last_error(), needle) != NULL; }

/* A bad integer: the error names it, quotes it, gives the range and why. */
static int bad_int(const char *text, long long min, long long max, const char *why) {
  long long v = 12345;
  char quoted[128], range[96];
  snprintf(quoted, sizeof quoted, "TEST_VAR='%s'", text);
  snprintf(range, sizeof range, "from %lld to %lld", min, max);
  int ok = hpu_parse_int("TEST_VAR", text, min, max, &v) == HPU_ERROR_INVALID_ARGUMENT &&
           v == 12345 && has(quoted) && has(range) && has(why);
  if (!ok) printf("\n  '%s': %s", text, hpu_last_error());
  return ok;
}

static void test_int_errors(void) {
  CU_ASSERT_TRUE(bad_int("abc", 1, 100, "not an integer"));
  CU_ASSERT_TRUE(bad_int("", 1, 100, "not an integer"));
  CU_ASSERT_TRUE(bad_int("  ", 1, 100, "not an integer"));
  CU_ASSERT_TRUE(bad_int("-", 1, 100, "not an integer"));
  CU_ASSERT_TRUE(bad_int("12abc", 1, 100, "trailing"));
  CU_ASSERT_TRUE(bad_int("0x10", 0, 100, "trailing"));
  CU_ASSERT_TRUE(bad_int("1.5", 0, 100, "trailing"));
  CU_ASSERT_TRUE(bad_int("1 2", 0, 100, "trailing"));
  CU_ASSERT_TRUE(bad_int("101", 1, 100, "out of range"));
  CU_ASSERT_TRUE(bad_int("0", 1, 100, "out of range"));
  CU_ASSERT_TRUE(bad_int("-1", 0, 100, "negative"));
  CU_ASSERT_TRUE(bad_int("-5", -3, 100, "out of range"));
  CU_ASSERT_TRUE(bad_int("99999999999999999999", 0, 100, "out of range"));
  CU_ASSERT_TRUE(bad_int("-99999999999999999999", -100, 100, "out of range"));
}

static void test_int_good(void) {
  long long v = 0;
  CU_ASSERT_EQUAL(hpu_parse_int("X", "42", 0, 100, &v), HPU_SUCCESS);
  CU_ASSERT_EQUAL(v, 42);
  CU_ASSERT_EQUAL(hpu_parse_int("X", " +7\t", 0, 100, &v), HPU_SUCCESS);
  CU_ASSERT_EQUAL(v, 7);
  CU_ASSERT_EQUAL(hpu_parse_int("X", "-3", -3, 100, &v), HPU_SUCCESS);
  CU_ASSERT_EQUAL(v, -3);
  CU_ASSERT_EQUAL(hpu_parse_int("X", "9223372036854775807", 0, 9223372036854775807LL, &v), HPU_SUCCESS);
  CU_ASSERT_EQUAL(v, 9223372036854775807LL);
}

static int bad_size(const char *text, const char *why) {
  unsigned long long v = 12345;
  char quoted[128];
  snprintf(quoted, sizeof quoted, "TEST_SIZE='%s'", text);
  int ok = hpu_parse_size("TEST_SIZE", text, 4096, 1ULL << 30, &v) == HPU_ERROR_INVALID_ARGUMENT &&
           v == 12345 && has(quoted) && has("from 4096 to 1073741824 bytes") && has(why);
  if (!ok) printf("\n  '%s': %s", text, hpu_last_error());
  return ok;
}

static void test_size(void) {
  CU_ASSERT_TRUE(bad_size("-1", "negative"));
  CU_ASSERT_TRUE(bad_size("abc", "not a number"));
  CU_ASSERT_TRUE(bad_size("", "not a number"));
  CU_ASSERT_TRUE(bad_size("12X", "unknown unit"));
  CU_ASSERT_TRUE(bad_size("1.5G", "unknown unit"));
  CU_ASSERT_TRUE(bad_size("4Kx", "trailing"));
  CU_ASSERT_TRUE(bad_size("4KiBB", "trailing"));
  CU_ASSERT_TRUE(bad_size("100", "out of range"));
  CU_ASSERT_TRUE(bad_size("2G", "out of range"));
  CU_ASSERT_TRUE(bad_size("99999999999999999999", "out of range"));
  CU_ASSERT_TRUE(bad_size("17179869184G", "out of range")); /* 2^34 G overflows 64 bits */
  unsigned long long v;
  const struct { const char *text; unsigned long long want; } good[] = {
      {"4096", 4096}, {"4K", 4096}, {"4k", 4096}, {"8KiB", 8192}, {"8KB", 8192},
      {"1M", 1 << 20}, {" 512M ", 512ull << 20}, {"1G", 1ull << 30}, {"65536B", 65536}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    CU_ASSERT_EQUAL(hpu_parse_size("S", good[i].text, 4096, 1ULL << 30, &v), HPU_SUCCESS);
    CU_ASSERT_EQUAL(v, good[i].want);
  }
}

static void test_double(void) {
  double v = 0;
  const char *bad[] = {"abc", "", "inf", "nan", "0x10", "1e400", "5s", "-1", "0", "2e9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_EQUAL(hpu_parse_double("T", bad[i], 0.001, 1e9, &v), HPU_ERROR_INVALID_ARGUMENT);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "T='%s'", bad[i]);
    CU_ASSERT_TRUE(has(quoted) && has("from 0.001 to 1e+09"));
  }
  CU_ASSERT_EQUAL(hpu_parse_double("T", "2.5", 0.001, 1e9, &v), HPU_SUCCESS);
  CU_ASSERT_DOUBLE_EQUAL(v, 2.5, 0);
}

static void test_env_unset_and_blank(void) {
  long long v = 0;
  unsetenv("HPU_TEST_SETTING");
  CU_ASSERT_EQUAL(hpu_env_int("HPU_TEST_SETTING", 77, 0, 10, &v), HPU_SUCCESS);
  CU_ASSERT_EQUAL(v, 77);
  setenv("HPU_TEST_SETTING", "  ", 1);
  CU_ASSERT_EQUAL(hpu_env_int("HPU_TEST_SETTING", 77, 0, 10, &v), HPU_SUCCESS);
  CU_ASSERT_EQUAL(v, 77);
  setenv("HPU_TEST_SETTING", "11", 1);
  CU_ASSERT_EQUAL(hpu_env_int("HPU_TEST_SETTING", 77, 0, 10, &v), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_TRUE(has("HPU_TEST_SETTING='11'"));
  unsetenv("HPU_TEST_SETTING");
}

/* hpu_init in a child with name=value: 0 when it fails naming both. */
static int init_fails_naming(const char *name, const char *value, const char *quoted) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    setenv(name, value, 1);
    hpu_status_t st = hpu_init();
    int n;
    int ok = st == HPU_ERROR_INVALID_ARGUMENT && has(name) && has(quoted) &&
             hpu_device_count(&n) == HPU_ERROR_INVALID_ARGUMENT && has(quoted);
    if (!ok) fprintf(stderr, "%s=%s: hpu_init gave %d: %s\n", name, value, st, hpu_last_error());
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_init_reports_bad_settings(void) {
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_MAX_GRAPH_NODES", "abc", "'abc'"));
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_MAX_GRAPH_NODES", "0", "'0'"));
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_LAZY_MODE", "yes", "'yes'"));
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_RECIPE_CACHE_SIZE", "-1", "'-1'"));
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_RECIPE_CACHE_BYTES", "lots", "'lots'"));
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_RECIPE_CACHE_CONFIG", "/tmp/x,false,12abc", "'12abc'"));
  CU_ASSERT_TRUE(init_fails_naming("PT_HPU_RECIPE_CACHE_CONFIG", "/tmp/x,maybe", "'maybe'"));
  CU_ASSERT_TRUE(init_fails_naming("OMP_NUM_THREADS", "four", "'four'"));
  CU_ASSERT_TRUE(init_fails_naming("HPU_NUM_CARDS", "3x", "'3x'"));
  CU_ASSERT_TRUE(init_fails_naming("HPU_CARD_MEMORY", "-1", "'-1'"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("environment settings", NULL, NULL);
  CU_add_test(s, "bad integers are named errors", test_int_errors);
  CU_add_test(s, "good integers parse", test_int_good);
  CU_add_test(s, "sizes with units", test_size);
  CU_add_test(s, "numbers with a fraction", test_double);
  CU_add_test(s, "unset or blank gives the default", test_env_unset_and_blank);
  CU_add_test(s, "hpu_init reports every module's bad setting", test_init_reports_bad_settings);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
