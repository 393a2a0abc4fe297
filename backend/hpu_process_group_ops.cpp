// The c10d ops for the HPU dispatch key: thin forwarders from
// torch.distributed's c10d:: ops to the process group's hpu backend (the
// "hccl" one, hpu_process_group.cpp), as PyTorch's Ops.cpp does for CPU,
// CUDA and PrivateUse1. Without them, hpu tensors would reach the generic
// CPU fallback.
#ifdef HPU_WITH_HCCL

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/library.h>

namespace habana_torch {
namespace {

using c10d::ReduceOp;

namespace hpu_c10d_ops {
using c10d::ProcessGroup;
using c10d::Work;
using PG = c10::intrusive_ptr<ProcessGroup>;
using WorkPtr = c10::intrusive_ptr<Work>;
using TensorLists = std::vector<std::vector<at::Tensor>>;
constexpr auto kHPU = c10::DeviceType::HPU;
inline std::chrono::milliseconds ms(int64_t t) { return std::chrono::milliseconds(t); }
inline c10::intrusive_ptr<c10d::Backend> be(const PG& pg) { return pg->getBackend(kHPU); }

std::tuple<std::vector<at::Tensor>, WorkPtr> allreduce_(at::TensorList tensors, const PG& pg,
                                                        const c10::intrusive_ptr<ReduceOp>& op,
                                                        const std::optional<at::Tensor>& sparse_indices, bool async_op,
                                                        int64_t timeout) {
  auto v = tensors.vec();
  c10d::AllreduceOptions o;
  o.reduceOp = *op;
  o.timeout = ms(timeout);
  o.asyncOp = async_op;
  o.sparseIndices = sparse_indices;
  auto w = be(pg)->allreduce(v, o);
  return {std::move(v), w};
}
WorkPtr allreduce_coalesced_(at::TensorList tensors, const PG& pg, const c10::intrusive_ptr<ReduceOp>& op,
                             bool async_op, int64_t timeout) {
  auto v = tensors.vec();
  c10d::AllreduceCoalescedOptions o;
  o.reduceOp = *op;
  o.timeout = ms(timeout);
  o.asyncOp = async_op;
  return be(pg)->allreduce_coalesced(v, o);
}
std::tuple<std::vector<at::Tensor>, WorkPtr> broadcast_(at::TensorList tensors, const PG& pg, int64_t root_rank,
                                                        int64_t root_tensor, bool async_op, int64_t timeout) {
  auto v = tensors.vec();
  auto w = be(pg)->broadcast(v, c10d::BroadcastOptions{root_rank, root_tensor, ms(timeout), async_op});
  return {std::move(v), w};
}
WorkPtr reduce_(at::TensorList tensors, const PG& pg, const c10::intrusive_ptr<ReduceOp>& op, int64_t root_rank,
                int64_t root_tensor, bool async_op, int64_t timeout) {
  auto v = tensors.vec();
  return be(pg)->reduce(v, c10d::ReduceOptions{*op, root_rank, root_tensor, ms(timeout), async_op});
}
std::tuple<TensorLists, WorkPtr> allgather_(const TensorLists& outputs, at::TensorList inputs, const PG& pg,
                                            bool async_op, int64_t timeout) {
  auto in = inputs.vec();
  auto out = outputs;
  auto w = be(pg)->allgather(out, in, c10d::AllgatherOptions{ms(timeout), async_op});
  return {outputs, w};
}
std::tuple<at::Tensor, WorkPtr> _allgather_base_(at::Tensor& out, at::Tensor& in, const PG& pg, bool async_op,
                                                 int64_t timeout) {
  auto w = be(pg)->_allgather_base(out, in, c10d::AllgatherOptions{ms(timeout), async_op});
  return {out, w};
}
WorkPtr allgather_coalesced_(const TensorLists& outputs, const at::TensorList& inputs, const PG& pg, bool async_op) {
  auto in = inputs.vec();
  auto out = outputs;
  c10d::AllgatherOptions o;
  o.asyncOp = async_op;
  return be(pg)->allgather_coalesced(out, in, o);
}
WorkPtr allgather_into_tensor_coalesced_(at::TensorList outputs, at::TensorList inputs, const PG& pg,
                                         bool async_op) {
  auto out = outputs.vec();
  auto in = inputs.vec();
  c10d::AllgatherOptions o;
  o.asyncOp = async_op;
  return be(pg)->allgather_into_tensor_coalesced(out, in, o);
}
std::tuple<std::vector<at::Tensor>, WorkPtr> reduce_scatter_(const at::TensorList& outputs,
                                                             const TensorLists& inputs, const PG& pg,
                                                             const c10::intrusive_ptr<ReduceOp>& op, bool async_op,
                                                             int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs;
  auto w = be(pg)->reduce_scatter(out, in, c10d::ReduceScatterOptions{*op, ms(timeout), async_op});
  return {std::move(out), w};
}
std::tuple<at::Tensor, WorkPtr> _reduce_scatter_base_(at::Tensor& out, at::Tensor& in, const PG& pg,
                                                      const c10::intrusive_ptr<ReduceOp>& op, bool async_op,
                                                      int64_t timeout) {
  auto w = be(pg)->_reduce_scatter_base(out, in, c10d::ReduceScatterOptions{*op, ms(timeout), async_op});
  return {out, w};
}
WorkPtr reduce_scatter_tensor_coalesced_(at::TensorList outputs, at::TensorList inputs, const PG& pg,
                                         const c10::intrusive_ptr<ReduceOp>& op, bool async_op, int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs.vec();
  return be(pg)->reduce_scatter_tensor_coalesced(out, in, c10d::ReduceScatterOptions{*op, ms(timeout), async_op});
}
WorkPtr gather_(const TensorLists& outputs, const at::TensorList& inputs, const PG& pg, int64_t root_rank,
                bool async_op, int64_t timeout) {
  auto out = outputs;
  auto in = inputs.vec();
  return be(pg)->gather(out, in, c10d::GatherOptions{root_rank, ms(timeout), async_op});
}
std::tuple<std::vector<at::Tensor>, WorkPtr> scatter_(const at::TensorList& outputs, const TensorLists& inputs,
                                                      const PG& pg, int64_t root_rank, bool async_op,
                                                      int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs;
  auto w = be(pg)->scatter(out, in, c10d::ScatterOptions{root_rank, ms(timeout), async_op});
  return {std::move(out), w};
}
std::tuple<std::vector<at::Tensor>, WorkPtr> alltoall_(const at::TensorList& outputs, const at::TensorList& inputs,
                                                       const PG& pg, bool async_op, int64_t timeout) {
  auto out = outputs.vec();
  auto in = inputs.vec();
  auto w = be(pg)->alltoall(out, in, c10d::AllToAllOptions{ms(timeout), async_op});
  return {std::move(out), w};
}
WorkPtr alltoall_base_(at::Tensor& out, at::Tensor& in, const PG& pg, std::vector<int64_t> out_splits,
                       std::vector<int64_t> in_splits, bool async_op, int64_t timeout) {
  return be(pg)->alltoall_base(out, in, out_splits, in_splits, c10d::AllToAllOptions{ms(timeout), async_op});
}
WorkPtr send(at::TensorList tensors, const PG& pg, int64_t dst, int64_t tag) {
  auto v = tensors.vec();
  return be(pg)->send(v, (int)dst, (int)tag);
}
WorkPtr recv_(at::TensorList tensors, const PG& pg, int64_t src, int64_t tag) {
  auto v = tensors.vec();
  return be(pg)->recv(v, (int)src, (int)tag);
}
WorkPtr recv_any_source_(at::TensorList tensors, const PG& pg, int64_t tag) {
  auto v = tensors.vec();
  return be(pg)->recvAnysource(v, (int)tag);
}
WorkPtr barrier(at::Tensor /* tensor */, const PG& pg, const std::vector<int64_t>& device_ids, bool async_op,
                int64_t timeout) {
  c10d::BarrierOptions o;
  o.device_ids = device_ids;
  o.timeout = ms(timeout);
  o.asyncOp = async_op;
  return be(pg)->barrier(o);
}
}  // namespace hpu_c10d_ops

TORCH_LIBRARY_IMPL(c10d, HPU, m) {
  m.impl("allreduce_", hpu_c10d_ops::allreduce_);
  m.impl("allreduce_coalesced_", hpu_c10d_ops::allreduce_coalesced_);
  m.impl("broadcast_", hpu_c10d_ops::broadcast_);
  m.impl("reduce_", hpu_c10d_ops::reduce_);
  m.impl("allgather_", hpu_c10d_ops::allgather_);
  m.impl("_allgather_base_", hpu_c10d_ops::_allgather_base_);
  m.impl("allgather_coalesced_", hpu_c10d_ops::allgather_coalesced_);
  m.impl("allgather_into_tensor_coalesced_", hpu_c10d_ops::allgather_into_tensor_coalesced_);
  m.impl("reduce_scatter_", hpu_c10d_ops::reduce_scatter_);
  m.impl("_reduce_scatter_base_", hpu_c10d_ops::_reduce_scatter_base_);
  m.impl("reduce_scatter_tensor_coalesced_", hpu_c10d_ops::reduce_scatter_tensor_coalesced_);
  m.impl("gather_", hpu_c10d_ops::gather_);
  m.impl("scatter_", hpu_c10d_ops::scatter_);
  m.impl("alltoall_", hpu_c10d_ops::alltoall_);
  m.impl("alltoall_base_", hpu_c10d_ops::alltoall_base_);
  m.impl("send", hpu_c10d_ops::send);
  m.impl("recv_", hpu_c10d_ops::recv_);
  m.impl("recv_any_source_", hpu_c10d_ops::recv_any_source_);
  m.impl("barrier", hpu_c10d_ops::barrier);
}

}  // namespace
}  // namespace habana_torch

#endif  // HPU_WITH_HCCL
