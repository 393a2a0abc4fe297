// Native math ops: the four arithmetic ops (broadcasting, type promotion,
// alpha, rounding modes), relu, the matmul family and the random fills.
// Each op works out PyTorch's result dtype and shape and hands one C node to
// the core; the kernels do the rest.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_generator.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

struct BinarySpec {
  hpu_op_t op;
  const char* name;
  c10::Scalar alpha = 1;
  hpu_rounding_t rounding = HPU_ROUND_NONE;
};

hpu_rounding_t parse_rounding(std::optional<std::string_view> mode) {
  if (!mode.has_value()) return HPU_ROUND_NONE;
  if (*mode == "trunc") return HPU_ROUND_TRUNC;
  if (*mode == "floor") return HPU_ROUND_FLOOR;
  TORCH_CHECK_VALUE(false, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                    *mode, "'");
}

at::ScalarType binary_result_type(const BinarySpec& spec, const at::Tensor& a, const at::Tensor& b) {
  at::ScalarType type = result_of({a, b});
  if (spec.op == HPU_OP_DIV && spec.rounding == HPU_ROUND_NONE && !at::isFloatingType(type))
    type = default_float();
  if (spec.op == HPU_OP_SUB)
    TORCH_CHECK(type != at::kBool,
                "Subtraction, the `-` operator, with two bool tensors is not supported. "
                "Use the `^` or `logical_xor()` operator instead.");
  return type;
}

}  // namespace

void check_host_divisor(const at::Tensor& divisor, at::ScalarType compute) {
  if (!is_cpu_scalar(divisor) || !at::isIntegralType(compute, /*includeBool=*/false)) return;
  // Cast as the kernel narrows it: 256 is 0 in uint8 (the CPU agrees).
  TORCH_CHECK(divisor.to(compute).item<int64_t>() != 0, "ZeroDivisionError");
}

namespace {

// out <- a (op) b, out already has the broadcast shape and a dtype that the
// result type can be cast to.
void run_binary(const BinarySpec& spec, const at::Tensor& out, const at::Tensor& a_in,
                const at::Tensor& b, at::ScalarType compute) {
  if (out.numel() == 0) return;
  if (spec.op == HPU_OP_DIV && spec.rounding != HPU_ROUND_NONE) check_host_divisor(b, compute);
  auto a_ = on_device(a_in, out);
  const at::Tensor& a = *a_;
  hpu_node_t node;
  init_node(&node, spec.op);
  node.num_outputs = 1;
  fill_desc(&node.outputs[0], out);
  fill_desc(&node.inputs[0], a);
  if (is_cpu_scalar(b) && is_hpu(out)) {
    node.num_inputs = 1;
    node.params.binary.other = to_hpu_scalar(b.item());
  } else {
    node.num_inputs = 2;
    fill_desc(&node.inputs[1], b);
  }
  node.compute_dtype = to_hpu_dtype(compute);
  node.params.binary.alpha = to_hpu_scalar(spec.alpha);
  node.params.binary.rounding = spec.rounding;
  launch(out.device().index(), node);
}

at::Tensor binary(const BinarySpec& spec, const at::Tensor& a, const at::Tensor& b) {
  check_same_device(spec.name, {&a, &b});
  at::ScalarType type = binary_result_type(spec, a, b);
  check_hpu_dtype(type, spec.name);
  auto shape = at::infer_size(a.sizes(), b.sizes());
  const at::Tensor& anchor = is_hpu(a) ? a : b;
  at::Tensor out = new_hpu_tensor(shape, type, anchor.device().index());
  run_binary(spec, out, a, b, type);
  return out;
}

at::Tensor& binary_out(const BinarySpec& spec, const at::Tensor& a, const at::Tensor& b,
                       at::Tensor& out) {
  check_same_device(spec.name, {&a, &b, &out});
  at::ScalarType type = binary_result_type(spec, a, b);
  TORCH_CHECK(c10::canCast(type, out.scalar_type()), "result type ", type,
              " can't be cast to the desired output type ", out.scalar_type());
  auto shape = at::infer_size(a.sizes(), b.sizes());
  if (out.sizes() != at::IntArrayRef(shape)) {
    if (out.is_same(a)) {
      TORCH_CHECK(false, "output with shape ", out.sizes(),
                  " doesn't match the broadcast shape ", at::IntArrayRef(shape));
    }
    at::native::resize_output(out, shape);
  }
  run_binary(spec, out, a, b, type);
  return out;
}

#define HPU_BINARY_OPS(NAME, OPCODE)                                                         \
  at::Tensor NAME##_tensor(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) { \
    return binary({OPCODE, #NAME, alpha}, a, b);                                             \
  }                                                                                          \
  at::Tensor& NAME##_inplace(at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) {  \
    return binary_out({OPCODE, #NAME "_", alpha}, a, b, a);                                  \
  }                                                                                          \
  at::Tensor& NAME##_out(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,  \
                         at::Tensor& out) {                                                  \
    return binary_out({OPCODE, #NAME ".out", alpha}, a, b, out);                             \
  }
HPU_BINARY_OPS(add, HPU_OP_ADD)
HPU_BINARY_OPS(sub, HPU_OP_SUB)
#undef HPU_BINARY_OPS

at::Tensor mul_tensor(const at::Tensor& a, const at::Tensor& b) { return binary({HPU_OP_MUL, "mul"}, a, b); }
at::Tensor& mul_inplace(at::Tensor& a, const at::Tensor& b) { return binary_out({HPU_OP_MUL, "mul_"}, a, b, a); }
at::Tensor& mul_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return binary_out({HPU_OP_MUL, "mul.out"}, a, b, out);
}

BinarySpec div_spec(const char* name, std::optional<std::string_view> mode) {
  BinarySpec spec{HPU_OP_DIV, name};
  spec.rounding = parse_rounding(mode);
  return spec;
}
at::Tensor div_tensor(const at::Tensor& a, const at::Tensor& b) { return binary(div_spec("div", {}), a, b); }
at::Tensor& div_inplace(at::Tensor& a, const at::Tensor& b) { return binary_out(div_spec("div_", {}), a, b, a); }
at::Tensor& div_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return binary_out(div_spec("div.out", {}), a, b, out);
}
at::Tensor div_mode(const at::Tensor& a, const at::Tensor& b, std::optional<std::string_view> mode) {
  return binary(div_spec("div", mode), a, b);
}
at::Tensor& div_mode_inplace(at::Tensor& a, const at::Tensor& b, std::optional<std::string_view> mode) {
  return binary_out(div_spec("div_", mode), a, b, a);
}
at::Tensor& div_mode_out(const at::Tensor& a, const at::Tensor& b, std::optional<std::string_view> mode,
                         at::Tensor& out) {
  return binary_out(div_spec("div.out", mode), a, b, out);
}

void run_relu(const at::Tensor& out, const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "relu: boolean tensors are not supported");
  if (out.numel() == 0) return;
  hpu_node_t node;
  init_node(&node, HPU_OP_RELU);
  node.num_inputs = 1;
  node.num_outputs = 1;
  fill_desc(&node.inputs[0], self);
  fill_desc(&node.outputs[0], out);
  node.compute_dtype = node.outputs[0].dtype;
  launch(out.device().index(), node);
}
at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  run_relu(out, self);
  return out;
}
at::Tensor& relu_(at::Tensor& self) {
  run_relu(self, self);
  return self;
}

// ---- matmul family: out = beta * bias + alpha * (a @ b), batched or not ----

void check_matmul(const char* op, const at::Tensor& a, const at::Tensor& b, int64_t dims) {
  TORCH_CHECK(a.dim() == dims, op, ": expected a ", dims, "-D tensor for the first operand, got ",
              a.dim(), "-D");
  TORCH_CHECK(b.dim() == dims, op, ": expected a ", dims, "-D tensor for the second operand, got ",
              b.dim(), "-D");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
  check_hpu_dtype(a.scalar_type(), op);
  TORCH_CHECK(a.size(-1) == b.size(-2), op, ": shapes cannot be multiplied (",
              a.sizes(), " and ", b.sizes(), ")");
  if (dims == 3)
    TORCH_CHECK(a.size(0) == b.size(0), op, ": batch sizes differ (", a.size(0), " and ", b.size(0), ")");
}

void run_matmul(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                const at::Tensor* bias, const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (out.numel() == 0) return;
  hpu_node_t node;
  init_node(&node, HPU_OP_MATMUL);
  node.num_outputs = 1;
  fill_desc(&node.outputs[0], out);
  fill_desc(&node.inputs[0], a);
  fill_desc(&node.inputs[1], b);
  node.num_inputs = 2;
  // beta == 0 means the bias is ignored, NaNs included (PyTorch's rule).
  if (bias && bias->defined() && !(beta.isIntegral(true) ? beta.toLong() == 0 : beta.toDouble() == 0.0)) {
    fill_desc(&node.inputs[2], *on_device(*bias, out));
    node.num_inputs = 3;
  }
  node.compute_dtype = node.outputs[0].dtype;
  node.params.matmul.alpha = to_hpu_scalar(alpha);
  node.params.matmul.beta = to_hpu_scalar(beta);
  launch(out.device().index(), node);
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  check_same_device("mm", {&a, &b});
  check_matmul("mm", a, b, 2);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  run_matmul(out, a, b, nullptr, 0, 1);
  return out;
}
at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  check_same_device("mm.out", {&a, &b, &out});
  check_matmul("mm", a, b, 2);
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), "mm.out: expected out dtype ", a.scalar_type(),
              ", got ", out.scalar_type());
  at::native::resize_output(out, {a.size(0), b.size(1)});
  run_matmul(out, a, b, nullptr, 0, 1);
  return out;
}
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  check_same_device("bmm", {&a, &b});
  check_matmul("bmm", a, b, 3);
  at::Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  run_matmul(out, a, b, nullptr, 0, 1);
  return out;
}
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  check_same_device("bmm.out", {&a, &b, &out});
  check_matmul("bmm", a, b, 3);
  at::native::resize_output(out, {a.size(0), a.size(1), b.size(2)});
  run_matmul(out, a, b, nullptr, 0, 1);
  return out;
}

void check_bias(const char* op, const at::Tensor& bias, at::IntArrayRef shape, const at::Tensor& a) {
  TORCH_CHECK(bias.scalar_type() == a.scalar_type(), op, ": expected the bias to have dtype ",
              a.scalar_type(), ", got ", bias.scalar_type());
  TORCH_CHECK(at::is_expandable_to(bias.sizes(), shape), op, ": bias of shape ", bias.sizes(),
              " does not broadcast to ", shape);
}

at::Tensor addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_same_device("addmm", {&bias, &a, &b});
  check_matmul("addmm", a, b, 2);
  std::vector<int64_t> shape{a.size(0), b.size(1)};
  check_bias("addmm", bias, shape, a);
  at::Tensor out = at::empty(shape, a.options());
  run_matmul(out, a, b, &bias, beta, alpha);
  return out;
}
at::Tensor& addmm_out(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_same_device("addmm.out", {&bias, &a, &b, &out});
  check_matmul("addmm", a, b, 2);
  std::vector<int64_t> shape{a.size(0), b.size(1)};
  check_bias("addmm", bias, shape, a);
  if (out.is_same(bias)) {
    TORCH_CHECK(out.sizes() == at::IntArrayRef(shape), "addmm_: self of shape ", out.sizes(),
                " does not match the product's shape ", at::IntArrayRef(shape));
    // In place: the product cannot be written over its own bias mid-read.
    at::Tensor tmp = at::empty(shape, a.options());
    run_matmul(tmp, a, b, &bias, beta, alpha);
    copy_between(out, tmp);
    return out;
  }
  at::native::resize_output(out, shape);
  run_matmul(out, a, b, &bias, beta, alpha);
  return out;
}
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  return addmm_out(self, a, b, beta, alpha, self);
}
at::Tensor baddbmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_same_device("baddbmm", {&bias, &a, &b});
  check_matmul("baddbmm", a, b, 3);
  std::vector<int64_t> shape{a.size(0), a.size(1), b.size(2)};
  check_bias("baddbmm", bias, shape, a);
  at::Tensor out = at::empty(shape, a.options());
  run_matmul(out, a, b, &bias, beta, alpha);
  return out;
}

// ---- random fills: Philox in the core, state in the hpu generator ----

void run_random(at::Tensor& self, hpu_op_t op, double a, double b,
                const std::optional<at::Generator>& gen, const at::Tensor* probs = nullptr) {
  TORCH_CHECK(is_hpu(self), "expected an hpu tensor");
  if (self.numel() == 0) return;
  hpu_node_t node{};
  node.op = op;
  node.num_outputs = 1;
  node.outputs[0] = to_desc(self);
  node.compute_dtype = node.outputs[0].dtype;
  node.params.rng.a = a;
  node.params.rng.b = b;
  if (probs) {
    node.num_inputs = 1;
    node.inputs[0] = to_desc(*probs);
  }
  generator_for(gen, self.device().index())->prepare(node);
  launch(self.device().index(), node);
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  run_random(self, HPU_OP_RNG_UNIFORM, from, to, gen);
  return self;
}
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  run_random(self, HPU_OP_RNG_NORMAL, mean, std, gen);
  return self;
}
at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  run_random(self, HPU_OP_RNG_BERNOULLI, p, 0, gen);
  return self;
}
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  auto probs_ = on_device(p, self);
  const at::Tensor& probs = *probs_;
  check_same_device("bernoulli_", {&self, &probs});
  run_random(self, HPU_OP_RNG_BERNOULLI, 0, 0, gen, &probs);
  return self;
}
at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  run_random(out, HPU_OP_RNG_BERNOULLI, 0, 0, gen, &self);
  return out;
}

// random_'s default upper bound: 2^digits for floats (every integer there is
// exact), the type's max + 1 for integers, as PyTorch's CPU kernel.
int64_t random_default_to(at::ScalarType type) {
  switch (type) {
    case at::kBool: return 2;
    case at::kHalf: return (int64_t{1} << 11) + 1;
    case at::kBFloat16: return (int64_t{1} << 8) + 1;
    case at::kFloat: return (int64_t{1} << 24) + 1;
    case at::kDouble: return (int64_t{1} << 53) + 1;
    case at::kByte: return 256;
    case at::kChar: return 128;
    case at::kShort: return 32768;
    case at::kInt: return int64_t{1} << 31;
    default: return std::numeric_limits<int64_t>::max();
  }
}
at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  int64_t upper = to.has_value() ? *to : random_default_to(self.scalar_type());
  TORCH_CHECK(from < upper, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", upper);
  run_random(self, HPU_OP_RNG_RANDOM, static_cast<double>(from), static_cast<double>(upper), gen);
  return self;
}
at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}
at::Tensor& random_default(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_from(self, 0, std::nullopt, gen);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("add.Tensor", TORCH_FN(add_tensor));
  m.impl("add_.Tensor", TORCH_FN(add_inplace));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub.Tensor", TORCH_FN(sub_tensor));
  m.impl("sub_.Tensor", TORCH_FN(sub_inplace));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("mul.Tensor", TORCH_FN(mul_tensor));
  m.impl("mul_.Tensor", TORCH_FN(mul_inplace));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("div.Tensor", TORCH_FN(div_tensor));
  m.impl("div_.Tensor", TORCH_FN(div_inplace));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("div.Tensor_mode", TORCH_FN(div_mode));
  m.impl("div_.Tensor_mode", TORCH_FN(div_mode_inplace));
  m.impl("div.out_mode", TORCH_FN(div_mode_out));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("addmm_", TORCH_FN(addmm_));
  m.impl("baddbmm", TORCH_FN(baddbmm));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor));
  m.impl("bernoulli", TORCH_FN(bernoulli));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_default));
}

}  // namespace habana_torch
