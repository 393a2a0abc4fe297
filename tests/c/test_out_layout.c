/* hpu_tensor_output_strides: the layouts PyTorch's TensorIterator gives
 * (each expected value printed by torch 2.13 on the CPU for the same
 * operands); tests/python checks the ops themselves against the CPU. */
#include <CUnit/Basic.h>
#include <string.h>

#include "hpu/tensor.h"

static hpu_tensor_t desc(int ndim, const int64_t *sizes, const int64_t *strides) {
  hpu_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = HPU_FLOAT32;
  t.ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides[d];
  }
  return t;
}

static int strides_are(int ndim, const int64_t *got, const int64_t *want) {
  return memcmp(got, want, (size_t)ndim * sizeof *got) == 0;
}

static void test_contiguous_inputs_give_row_major(void) {
  int64_t s[2] = {3, 4}, st[2] = {4, 1}, out[2];
  hpu_tensor_t a = desc(2, s, st);
  const hpu_tensor_t *ops[2] = {&a, &a};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(2, s, 2, ops, out), 1);
  CU_ASSERT_TRUE(strides_are(2, out, st));
}

static void test_transposed_input_keeps_its_layout(void) {
  int64_t s[2] = {64, 48}, st[2] = {1, 64}, out[2];
  hpu_tensor_t a = desc(2, s, st), scalar = desc(0, NULL, NULL);
  const hpu_tensor_t *ops[2] = {&a, &scalar};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(2, s, 1, ops, out), 0); /* relu(y.t()) */
  CU_ASSERT_TRUE(strides_are(2, out, st));
  memset(out, 0, sizeof out);
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(2, s, 2, ops, out), 0); /* y.t() + 1 */
  CU_ASSERT_TRUE(strides_are(2, out, st));
}

static void test_channels_last_and_permuted(void) {
  int64_t s[4] = {2, 3, 4, 5}, cl[4] = {60, 1, 15, 3}, out[4];
  hpu_tensor_t a = desc(4, s, cl);
  const hpu_tensor_t *ops[2] = {&a, &a};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(4, s, 2, ops, out), 0);
  CU_ASSERT_TRUE(strides_are(4, out, cl));
  /* randn(2,3,4,5).permute(0,2,3,1) * 2 -> (60, 5, 1, 20) */
  int64_t ps[4] = {2, 4, 5, 3}, pst[4] = {60, 5, 1, 20};
  hpu_tensor_t p = desc(4, ps, pst);
  const hpu_tensor_t *pops[1] = {&p};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(4, ps, 1, pops, out), 0);
  CU_ASSERT_TRUE(strides_are(4, out, pst));
}

static void test_broadcast_and_gaps(void) {
  /* randn(4,3).t() + randn(4): (1, 3), whichever operand comes first */
  int64_t s[2] = {3, 4}, ast[2] = {1, 3}, bs[1] = {4}, bst[1] = {1}, out[2];
  hpu_tensor_t a = desc(2, s, ast), b = desc(1, bs, bst);
  const hpu_tensor_t *ab[2] = {&a, &b}, *ba[2] = {&b, &a};
  int64_t want[2] = {1, 3};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(2, s, 2, ab, out), 0);
  CU_ASSERT_TRUE(strides_are(2, out, want));
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(2, s, 2, ba, out), 0);
  CU_ASSERT_TRUE(strides_are(2, out, want));
  /* randn(5,3)[:, ::2].t(): sizes (2,5) strides (2,3) -> dense (1, 2) */
  int64_t gs[2] = {2, 5}, gst[2] = {2, 3}, gwant[2] = {1, 2};
  hpu_tensor_t g = desc(2, gs, gst);
  const hpu_tensor_t *gops[1] = {&g};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(2, gs, 1, gops, out), 0);
  CU_ASSERT_TRUE(strides_are(2, out, gwant));
  /* randn(3,1,4).expand(3,5,4): + 1 -> (20, 4, 1); + a (20, 1, 5) tensor -> (20, 1, 5) */
  int64_t es[3] = {3, 5, 4}, est[3] = {4, 0, 1}, tst[3] = {20, 1, 5}, out3[3];
  int64_t ewant[3] = {20, 4, 1};
  hpu_tensor_t e = desc(3, es, est), t = desc(3, es, tst);
  const hpu_tensor_t *e1[1] = {&e}, *et[2] = {&e, &t};
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(3, es, 1, e1, out3), 1);
  CU_ASSERT_TRUE(strides_are(3, out3, ewant));
  CU_ASSERT_EQUAL(hpu_tensor_output_strides(3, es, 2, et, out3), 0);
  CU_ASSERT_TRUE(strides_are(3, out3, tst));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("out_layout", NULL, NULL);
  CU_add_test(s, "contiguous inputs give row-major", test_contiguous_inputs_give_row_major);
  CU_add_test(s, "a transposed input keeps its layout", test_transposed_input_keeps_its_layout);
  CU_add_test(s, "channels-last and permuted inputs", test_channels_last_and_permuted);
  CU_add_test(s, "broadcast, gaps and expanded inputs", test_broadcast_and_gaps);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
