// Building C nodes of the nn family (ops_nn.def) from tensors, for the
// files that launch them: hpu_ops_nn.cpp and hpu_ops_reduce.cpp. Not in
// hpu_ops.h: op files name their aten ops' functions freely (add_out is
// add.out in hpu_ops_math.cpp).
#pragma once

#include <ATen/ATen.h>

#include "hpu_common.h"

namespace habana_torch {

inline int dev_of(const at::Tensor& t) { return t.device().index(); }

inline hpu_node_t make_node(hpu_op_t op) {
  hpu_node_t n{};
  n.op = op;
  return n;
}

inline void add_in(hpu_node_t& n, const at::Tensor& t) { n.inputs[n.num_inputs++] = to_desc(t); }
inline void add_out(hpu_node_t& n, const at::Tensor& t) { n.outputs[n.num_outputs++] = to_desc(t); }

}  // namespace habana_torch
