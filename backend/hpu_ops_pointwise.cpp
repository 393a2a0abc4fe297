// The pointwise op family's launch helpers (hpu_pointwise.h) and its unary
// and binary ops: math (exp, floor, ...), arithmetic on two operands
// (maximum, atan2, remainder, bitwise, xlogy), comparisons and logical ops,
// pow. The family's other files: hpu_ops_activation.cpp (activations and
// their backwards), hpu_ops_loss.cpp (elementwise losses and their
// reductions), hpu_ops_ternary.cpp (clamp, where, lerp, addcmul, arange,
// triu / tril, the fused optimizer steps). Kernels: csrc/kernels/pointwise.c.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <limits>

#include "hpu_pointwise.h"

namespace habana_torch {

namespace pointwise {

// Types ---------------------------------------------------------------------

// Integer inputs of float ops compute in the default float type.
at::ScalarType float_type(at::ScalarType t) {
  return at::isIntegralType(t, /*includeBool=*/true) ? default_float() : t;
}

std::vector<int64_t> shape_of(std::initializer_list<Arg> args) {
  std::vector<int64_t> shape;
  for (const Arg& a : args)
    if (a.t) shape = at::infer_size(shape, a.t->sizes());
  return shape;
}

static const at::Tensor* anchor_of(std::initializer_list<Arg> args) {
  const at::Tensor* first = nullptr;
  for (const Arg& a : args) {
    if (!a.t) continue;
    if (is_hpu(*a.t)) return a.t;
    if (!first) first = a.t;
  }
  return first;
}

void check_devices(const char* name, std::initializer_list<Arg> args, const at::Tensor* out) {
  std::vector<const at::Tensor*> ts;
  for (const Arg& a : args)
    if (a.t) ts.push_back(a.t);
  if (out) ts.push_back(out);
  std::optional<c10::Device> device;
  for (const at::Tensor* t : ts) {
    if (!t->defined() || is_cpu_scalar(*t)) continue;
    if (!device) device = t->device();
    TORCH_CHECK(*device == t->device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *device, " and ", t->device(), "! (in ", name, ")");
  }
}

// Launch ----------------------------------------------------------------------

// out <- op(args) with out already of the broadcast shape.
void run(hpu_op_t op, const at::Tensor& out, std::initializer_list<Arg> args,
         at::ScalarType compute, const Params& prm) {
  if (out.numel() == 0) return;
  hpu_node_t node;
  init_node(&node, op);
  node.num_outputs = 1;
  fill_desc(&node.outputs[0], out);
  node.compute_dtype = to_hpu_dtype(compute);
  auto& p = node.params.pointwise;
  for (int k = 0; k < 6; k++) p.s[k] = prm.s[k];
  for (int k = 0; k < 4; k++) p.i[k] = prm.i[k];
  int k = 0;
  for (const Arg& a : args) {
    if (a.t && !is_cpu_scalar(*a.t)) {
      fill_desc(&node.inputs[node.num_inputs++], *a.t);
    } else {
      p.scalar_operands |= 1u << k;
      p.operand[k] = to_hpu_scalar(a.t ? a.t->item() : a.s);
    }
    k++;
  }
  launch(out.device().index(), node);
}

// Functional: a new output of dtype `result`.
at::Tensor pw(const char* name, hpu_op_t op, std::initializer_list<Arg> args,
              at::ScalarType result, at::ScalarType compute, const Params& prm) {
  check_devices(name, args, nullptr);
  check_hpu_dtype(result, name);
  check_hpu_dtype(compute, name);
  const at::Tensor* anchor = anchor_of(args);
  at::Tensor out;
  if (args.size() == 1 || std::all_of(args.begin() + 1, args.end(), [&](const Arg& a) {
        return !a.t || a.t->sizes() == anchor->sizes() || is_cpu_scalar(*a.t);
      })) {
    // Row-major whatever the inputs' layout: PyTorch models the hpu device
    // that way (its fake tensors, which torch.compile traces with, give hpu
    // ops row-major results), as Gaudi's bridge does. The CPU would keep the
    // first tensor's layout instead (docs/NUMERICS.md).
    if (is_hpu(*anchor))
      out = new_hpu_tensor(anchor->sizes(), result, anchor->device().index());
    else
      out = at::empty(anchor->sizes(), anchor->options().dtype(result));
  } else if (is_hpu(*anchor)) {
    out = new_hpu_tensor(shape_of(args), result, anchor->device().index());
  } else {
    out = at::empty(shape_of(args), anchor->options().dtype(result));
  }
  run(op, out, args, compute, prm);
  return out;
}

// In place (out is one of the args) or out=.
at::Tensor& pw_into(const char* name, hpu_op_t op, at::Tensor& out, bool inplace,
                    std::initializer_list<Arg> args, at::ScalarType result,
                    at::ScalarType compute, const Params& prm) {
  check_devices(name, args, &out);
  check_hpu_dtype(compute, name);
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  auto shape = shape_of(args);
  if (inplace) {
    TORCH_CHECK(out.sizes() == at::IntArrayRef(shape), "output with shape ", out.sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  } else {
    at::native::resize_output(out, shape);
  }
  run(op, out, args, compute, prm);
  return out;
}

hpu_scalar_t fscalar(double v) { return hpu_scalar_float(v); }

void check_float_act(const char* name, const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", name,
                              "\" not implemented for '", t.scalar_type(), "'");
}

Params one_param(const c10::Scalar& a, const c10::Scalar& b) {
  Params p;
  p.s[0] = to_hpu_scalar(a);
  p.s[1] = to_hpu_scalar(b);
  return p;
}

}  // namespace pointwise

namespace {

using namespace pointwise;

// Unary ops ---------------------------------------------------------------------

// Float ops (exp, ...): integer inputs give the default float type.
template <hpu_op_t OP>
at::Tensor u_float(const at::Tensor& self) {
  auto t = float_type(self.scalar_type());
  return pw(hpu_op_name(OP), OP, {self}, t, t);
}
template <hpu_op_t OP>
at::Tensor& u_float_(at::Tensor& self) {
  return pw_into(hpu_op_name(OP), OP, self, true, {self}, float_type(self.scalar_type()),
                 float_type(self.scalar_type()));
}
template <hpu_op_t OP>
at::Tensor& u_float_out(const at::Tensor& self, at::Tensor& out) {
  auto t = float_type(self.scalar_type());
  return pw_into(hpu_op_name(OP), OP, out, false, {self}, t, t);
}

void check_not_bool(hpu_op_t op, const at::Tensor& self) {
  if (op == HPU_OP_NEG)
    TORCH_CHECK(self.scalar_type() != at::kBool,
                "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                "to invert a mask, use the `~` or `logical_not()` operator instead.");
  if (op == HPU_OP_BITWISE_NOT)
    TORCH_CHECK_TYPE(!at::isFloatingType(self.scalar_type()),
                     "bitwise_not_cpu\" not implemented for '", self.scalar_type(), "'");
}

// Same-dtype ops (neg, floor, ...).
template <hpu_op_t OP>
at::Tensor u_same(const at::Tensor& self) {
  check_not_bool(OP, self);
  return pw(hpu_op_name(OP), OP, {self}, self.scalar_type(), self.scalar_type());
}
template <hpu_op_t OP>
at::Tensor& u_same_(at::Tensor& self) {
  check_not_bool(OP, self);
  return pw_into(hpu_op_name(OP), OP, self, true, {self}, self.scalar_type(), self.scalar_type());
}
template <hpu_op_t OP>
at::Tensor& u_same_out(const at::Tensor& self, at::Tensor& out) {
  check_not_bool(OP, self);
  return pw_into(hpu_op_name(OP), OP, out, false, {self}, self.scalar_type(), self.scalar_type());
}

at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  return pw_into("abs", HPU_OP_ABS, out, false, {self}, self.scalar_type(), self.scalar_type());
}
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  check_devices("logical_not", {self}, &out);
  at::native::resize_output(out, self.sizes());
  run(HPU_OP_LOGICAL_NOT, out, {self}, self.scalar_type());
  return out;
}
at::Tensor isnan(const at::Tensor& self) {
  return pw("isnan", HPU_OP_ISNAN, {self}, at::kBool, self.scalar_type());
}

at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan,
                           std::optional<double> posinf, std::optional<double> neginf,
                           at::Tensor& out) {
  Params p;
  auto t = self.scalar_type();
  double big = 0, low = 0;
  switch (t) {
    case at::kHalf: big = std::numeric_limits<c10::Half>::max(); low = std::numeric_limits<c10::Half>::lowest(); break;
    case at::kBFloat16: big = std::numeric_limits<c10::BFloat16>::max(); low = std::numeric_limits<c10::BFloat16>::lowest(); break;
    case at::kFloat: big = std::numeric_limits<float>::max(); low = std::numeric_limits<float>::lowest(); break;
    default: big = std::numeric_limits<double>::max(); low = std::numeric_limits<double>::lowest(); break;
  }
  p.s[0] = fscalar(nan.value_or(0.0));
  p.s[1] = fscalar(posinf.value_or(big));
  p.s[2] = fscalar(neginf.value_or(low));
  TORCH_CHECK(out.scalar_type() == t, "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", t);
  return pw_into("nan_to_num", HPU_OP_NAN_TO_NUM, out, false, {self}, t, t, p);
}

// Binary ops --------------------------------------------------------------------

void check_binary(hpu_op_t op, at::ScalarType t) {
  switch (op) {
    case HPU_OP_BITWISE_AND: case HPU_OP_BITWISE_OR: case HPU_OP_BITWISE_XOR:
      TORCH_CHECK_NOT_IMPLEMENTED(!at::isFloatingType(t), "\"", hpu_op_name(op),
                                  "_cpu\" not implemented for '", t, "'");
      break;
    case HPU_OP_REMAINDER: case HPU_OP_FMOD: case HPU_OP_MAXIMUM: case HPU_OP_MINIMUM:
      TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool || op == HPU_OP_MAXIMUM || op == HPU_OP_MINIMUM,
                                  "\"", hpu_op_name(op), "_cpu\" not implemented for 'Bool'");
      break;
    default: break;
  }
}

// check_binary, then (remainder, fmod) a zero divisor known on the host. Such
// a divisor is a CPU scalar, so the result has a's elements; none: no error
// (the CPU checks element by element).
void check_binary(hpu_op_t op, at::ScalarType t, const at::Tensor& a, const at::Tensor& b) {
  check_binary(op, t);
  if ((op == HPU_OP_REMAINDER || op == HPU_OP_FMOD) && a.numel() != 0) check_host_divisor(b, t);
}

// Result and compute dtype of a binary op.
at::ScalarType bin_type(hpu_op_t op, at::ScalarType common) {
  if (op == HPU_OP_ATAN2) return float_type(common);
  return common;
}

template <hpu_op_t OP>
at::Tensor b_op(const at::Tensor& a, const at::Tensor& b) {
  auto t = bin_type(OP, result_of({a, b}));
  check_binary(OP, t, a, b);
  return pw(hpu_op_name(OP), OP, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& b_op_(at::Tensor& a, const at::Tensor& b) {
  auto t = bin_type(OP, result_of({a, b}));
  check_binary(OP, t, a, b);
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, t, t);
}
template <hpu_op_t OP>
at::Tensor& b_op_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto t = bin_type(OP, result_of({a, b}));
  check_binary(OP, t, a, b);
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, t, t);
}

// xlogy: a float op (integers promote to the default float); the kernel
// rounds log(y) to a bf16 / fp16 dtype before the product, as the CPU.
at::Tensor xlogy(const at::Tensor& a, const at::Tensor& b) {
  auto t = float_type(result_of({a, b}));
  return pw("xlogy", HPU_OP_XLOGY, {a, b}, t, t);
}
at::Tensor& xlogy_(at::Tensor& a, const at::Tensor& b) {
  auto t = float_type(result_of({a, b}));
  return pw_into("xlogy_", HPU_OP_XLOGY, a, true, {a, b}, t, t);
}
at::Tensor& xlogy_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto t = float_type(result_of({a, b}));
  return pw_into("xlogy", HPU_OP_XLOGY, out, false, {a, b}, t, t);
}

// Comparisons: bool results (in place: into self's dtype).
template <hpu_op_t OP>
at::Tensor cmp(const at::Tensor& a, const at::Tensor& b) {
  return pw(hpu_op_name(OP), OP, {a, b}, at::kBool, result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_(at::Tensor& a, const at::Tensor& b) {
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, a.scalar_type(), result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, out.scalar_type(), result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor cmp_s(const at::Tensor& a, const c10::Scalar& b) {
  return pw(hpu_op_name(OP), OP, {a, b}, at::kBool, result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_s_(at::Tensor& a, const c10::Scalar& b) {
  return pw_into(hpu_op_name(OP), OP, a, true, {a, b}, a.scalar_type(), result_of({a, b}));
}
template <hpu_op_t OP>
at::Tensor& cmp_s_out(const at::Tensor& a, const c10::Scalar& b, at::Tensor& out) {
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, out.scalar_type(), result_of({a, b}));
}
// logical_*: .out only (the rest are composites); compute in the common type.
template <hpu_op_t OP>
at::Tensor& logical_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return pw_into(hpu_op_name(OP), OP, out, false, {a, b}, out.scalar_type(), result_of({a, b}));
}

at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

// pow ---------------------------------------------------------------------------

void check_pow_int(const at::Tensor& base, const c10::Scalar& e) {
  if (at::isIntegralType(base.scalar_type(), true) && e.isIntegral(true))
    TORCH_CHECK(e.toLong() >= 0, "Integers to negative integer powers are not allowed.");
}
at::Tensor pow_ts(const at::Tensor& a, const c10::Scalar& e) {
  check_pow_int(a, e);
  auto t = result_of({a, e});
  return pw("pow", HPU_OP_POW, {a, e}, t, t);
}
at::Tensor& pow_ts_(at::Tensor& a, const c10::Scalar& e) {
  check_pow_int(a, e);
  auto t = result_of({a, e});
  return pw_into("pow_", HPU_OP_POW, a, true, {a, e}, t, t);
}
at::Tensor& pow_ts_out(const at::Tensor& a, const c10::Scalar& e, at::Tensor& out) {
  check_pow_int(a, e);
  auto t = result_of({a, e});
  return pw_into("pow", HPU_OP_POW, out, false, {a, e}, t, t);
}
at::Tensor pow_st(const c10::Scalar& s, const at::Tensor& e) {
  auto t = result_of({s, e});
  return pw("pow", HPU_OP_POW, {s, e}, t, t);
}
at::Tensor& pow_st_out(const c10::Scalar& s, const at::Tensor& e, at::Tensor& out) {
  auto t = result_of({s, e});
  return pw_into("pow", HPU_OP_POW, out, false, {s, e}, t, t);
}

}  // namespace

#define UNARY_FLOAT(NAME, OP)                                  \
  m.impl(#NAME, TORCH_FN(u_float<OP>));                        \
  m.impl(#NAME "_", TORCH_FN(u_float_<OP>));                   \
  m.impl(#NAME ".out", TORCH_FN(u_float_out<OP>));
#define UNARY_SAME(NAME, OP)                                   \
  m.impl(#NAME, TORCH_FN(u_same<OP>));                         \
  m.impl(#NAME "_", TORCH_FN(u_same_<OP>));                    \
  m.impl(#NAME ".out", TORCH_FN(u_same_out<OP>));

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  UNARY_FLOAT(exp, HPU_OP_EXP)
  UNARY_FLOAT(exp2, HPU_OP_EXP2)
  UNARY_FLOAT(log, HPU_OP_LOG)
  UNARY_FLOAT(log2, HPU_OP_LOG2)
  UNARY_FLOAT(log10, HPU_OP_LOG10)
  UNARY_FLOAT(log1p, HPU_OP_LOG1P)
  UNARY_FLOAT(expm1, HPU_OP_EXPM1)
  UNARY_FLOAT(sqrt, HPU_OP_SQRT)
  UNARY_FLOAT(rsqrt, HPU_OP_RSQRT)
  UNARY_FLOAT(reciprocal, HPU_OP_RECIPROCAL)
  UNARY_FLOAT(sin, HPU_OP_SIN)
  UNARY_FLOAT(cos, HPU_OP_COS)
  UNARY_FLOAT(tan, HPU_OP_TAN)
  UNARY_FLOAT(tanh, HPU_OP_TANH)
  UNARY_FLOAT(sigmoid, HPU_OP_SIGMOID)
  UNARY_FLOAT(erf, HPU_OP_ERF)
  UNARY_FLOAT(asin, HPU_OP_ASIN)
  UNARY_FLOAT(acos, HPU_OP_ACOS)
  UNARY_FLOAT(atan, HPU_OP_ATAN)
  UNARY_FLOAT(sinh, HPU_OP_SINH)
  UNARY_FLOAT(cosh, HPU_OP_COSH)
  UNARY_FLOAT(asinh, HPU_OP_ASINH)
  UNARY_FLOAT(acosh, HPU_OP_ACOSH)
  UNARY_FLOAT(atanh, HPU_OP_ATANH)
  UNARY_SAME(neg, HPU_OP_NEG)
  UNARY_SAME(floor, HPU_OP_FLOOR)
  UNARY_SAME(ceil, HPU_OP_CEIL)
  UNARY_SAME(round, HPU_OP_ROUND)
  UNARY_SAME(trunc, HPU_OP_TRUNC)
  UNARY_SAME(sign, HPU_OP_SIGN)
  UNARY_SAME(sgn, HPU_OP_SIGN)  // sign of a real tensor (complex is not an hpu dtype)
  UNARY_SAME(bitwise_not, HPU_OP_BITWISE_NOT)
  m.impl("abs.out", TORCH_FN(abs_out));
  m.impl("logical_not.out", TORCH_FN(logical_not_out));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("nan_to_num.out", TORCH_FN(nan_to_num_out));
}

#define BINARY(NAME, OVL, OP)                                           \
  m.impl(#NAME OVL, TORCH_FN(b_op<OP>));                                \
  m.impl(#NAME "_" OVL, TORCH_FN(b_op_<OP>));
#define CMP(NAME, OP)                                                   \
  m.impl(#NAME ".Tensor", TORCH_FN(cmp<OP>));                           \
  m.impl(#NAME "_.Tensor", TORCH_FN(cmp_<OP>));                         \
  m.impl(#NAME ".Tensor_out", TORCH_FN(cmp_out<OP>));                   \
  m.impl(#NAME ".Scalar", TORCH_FN(cmp_s<OP>));                         \
  m.impl(#NAME "_.Scalar", TORCH_FN(cmp_s_<OP>));                       \
  m.impl(#NAME ".Scalar_out", TORCH_FN(cmp_s_out<OP>));

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("maximum", TORCH_FN(b_op<HPU_OP_MAXIMUM>));
  m.impl("maximum.out", TORCH_FN(b_op_out<HPU_OP_MAXIMUM>));
  m.impl("minimum", TORCH_FN(b_op<HPU_OP_MINIMUM>));
  m.impl("minimum.out", TORCH_FN(b_op_out<HPU_OP_MINIMUM>));
  m.impl("atan2", TORCH_FN(b_op<HPU_OP_ATAN2>));
  m.impl("atan2_", TORCH_FN(b_op_<HPU_OP_ATAN2>));
  m.impl("atan2.out", TORCH_FN(b_op_out<HPU_OP_ATAN2>));
  m.impl("xlogy.Tensor", TORCH_FN(xlogy));
  m.impl("xlogy_.Tensor", TORCH_FN(xlogy_));
  m.impl("xlogy.OutTensor", TORCH_FN(xlogy_out));
  BINARY(remainder, ".Tensor", HPU_OP_REMAINDER)
  m.impl("remainder.Tensor_out", TORCH_FN(b_op_out<HPU_OP_REMAINDER>));
  BINARY(fmod, ".Tensor", HPU_OP_FMOD)
  m.impl("fmod.Tensor_out", TORCH_FN(b_op_out<HPU_OP_FMOD>));
  BINARY(bitwise_and, ".Tensor", HPU_OP_BITWISE_AND)
  m.impl("bitwise_and.Tensor_out", TORCH_FN(b_op_out<HPU_OP_BITWISE_AND>));
  BINARY(bitwise_or, ".Tensor", HPU_OP_BITWISE_OR)
  m.impl("bitwise_or.Tensor_out", TORCH_FN(b_op_out<HPU_OP_BITWISE_OR>));
  BINARY(bitwise_xor, ".Tensor", HPU_OP_BITWISE_XOR)
  m.impl("bitwise_xor.Tensor_out", TORCH_FN(b_op_out<HPU_OP_BITWISE_XOR>));
  CMP(eq, HPU_OP_EQ)
  CMP(ne, HPU_OP_NE)
  CMP(lt, HPU_OP_LT)
  CMP(le, HPU_OP_LE)
  CMP(gt, HPU_OP_GT)
  CMP(ge, HPU_OP_GE)
  m.impl("logical_and.out", TORCH_FN(logical_out<HPU_OP_LOGICAL_AND>));
  m.impl("logical_or.out", TORCH_FN(logical_out<HPU_OP_LOGICAL_OR>));
  m.impl("logical_xor.out", TORCH_FN(logical_out<HPU_OP_LOGICAL_XOR>));
  m.impl("rsub.Tensor", TORCH_FN(rsub));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_ts));
  m.impl("pow_.Scalar", TORCH_FN(pow_ts_));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_ts_out));
  m.impl("pow.Tensor_Tensor", TORCH_FN(b_op<HPU_OP_POW>));
  m.impl("pow_.Tensor", TORCH_FN(b_op_<HPU_OP_POW>));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(b_op_out<HPU_OP_POW>));
  m.impl("pow.Scalar", TORCH_FN(pow_st));
  m.impl("pow.Scalar_out", TORCH_FN(pow_st_out));
}

}  // namespace habana_torch
