// The "hccl" process-group backend: a c10d::Backend over the HCCL C API.
//
// Thin by design: argument checks that need at::Tensor, the tensor ->
// (pointer, count, dtype) mapping and the issue of each collective live
// here; every collective, its ordering, timeouts and peer-death handling are
// HCCL's. The Work it returns, the c10d op registration and the Python
// bindings are in the other hpu_process_group*.cpp files
// (hpu_process_group.h has the overview of how a collective completes).
#ifdef HPU_WITH_HCCL

#include "hpu_process_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace habana_torch {
namespace {

using c10d::OpType;
using c10d::ReduceOp;

hcclDataType_t to_hccl_dtype(at::ScalarType t) {
  switch (t) {
    case at::kChar: return hcclInt8;
    case at::kByte: case at::kBool: return hcclUint8;
    case at::kInt: return hcclInt32;
    case at::kLong: return hcclInt64;
    case at::kHalf: return hcclFloat16;
    case at::kFloat: return hcclFloat32;
    case at::kDouble: return hcclFloat64;
    case at::kBFloat16: return hcclBfloat16;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "hccl: unsupported tensor dtype ", t,
                   " (supported: int8, uint8, bool, int32, int64, float16, bfloat16, float32, float64, "
                   "complex for sum/avg)");
}

// A complex tensor travels as its real view (sum-like reductions only).
at::Tensor as_wire(const at::Tensor& t) {
  return t.is_complex() ? at::view_as_real(t) : t;
}

hcclRedOp_t to_hccl_op(const ReduceOp& op, const at::Tensor& t) {
  bool complex = t.is_complex();
  if (t.scalar_type() == at::kBool) {
    // As NCCL: sum/any of bools is max, product/all is min.
    if (op == ReduceOp::SUM || op == ReduceOp::MAX) return hcclMax;
    if (op == ReduceOp::PRODUCT || op == ReduceOp::MIN) return hcclMin;
    TORCH_CHECK_VALUE(false, "hccl: reduce op ", (int)op.op_, " is not supported for bool tensors");
  }
  switch (op.op_) {
    case ReduceOp::SUM: return hcclSum;
    case ReduceOp::AVG: return hcclAvg;
    case ReduceOp::PREMUL_SUM: return hcclSum;  // the factor is applied first
    case ReduceOp::PRODUCT:
      TORCH_CHECK_VALUE(!complex, "hccl: PRODUCT is not supported for complex tensors");
      return hcclProd;
    case ReduceOp::MIN:
      TORCH_CHECK_VALUE(!complex, "hccl: MIN is not supported for complex tensors");
      return hcclMin;
    case ReduceOp::MAX:
      TORCH_CHECK_VALUE(!complex, "hccl: MAX is not supported for complex tensors");
      return hcclMax;
    default: break;
  }
  TORCH_CHECK_VALUE(false, "hccl: reduce op BAND/BOR/BXOR is not supported (use SUM, AVG, PRODUCT, MIN, MAX, "
                    "PREMUL_SUM)");
}

void apply_premul(const ReduceOp& op, at::Tensor& t) {
  if (op != ReduceOp::PREMUL_SUM) return;
  auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK_VALUE(s, "hccl: PREMUL_SUM without a factor");
  if (s->tensor_factor.defined()) t.mul_(s->tensor_factor.to(t.device()));
  else t.mul_(s->double_factor);
}

class ProcessGroupHCCL : public c10d::Backend {
 public:
  ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms,
                   int device)
      : c10d::Backend(rank, size), device_(device), timeout_ms_(timeout_ms) {
    ensure_initialized();
    check_device_index(device);
    hcclUniqueId id;
    const std::string key = "hccl_unique_id";
    if (rank == 0) {
      hcclResult_t r = hcclGetUniqueId(&id);
      if (r != hcclSuccess) throw_hccl(nullptr, r, "hcclGetUniqueId");
      store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
    } else {
      std::vector<uint8_t> v = store->get(key);
      TORCH_CHECK(v.size() == sizeof id.internal, "hccl: bad unique id in the store (", v.size(), " bytes)");
      memcpy(id.internal, v.data(), v.size());
    }
    hcclConfig_t cfg = HCCL_CONFIG_INITIALIZER;
    cfg.timeoutMs = (int)std::min<int64_t>(std::max<int64_t>(timeout_ms, 1), INT32_MAX);
    hcclResult_t r = hcclCommInitRankConfig(&comm_, size, id, rank, &cfg);
    if (r != hcclSuccess) throw_hccl(nullptr, r, "hcclCommInitRank");
    start_watcher();
  }

  // A communicator split from `parent` (hcclCommSplit; collective over the
  // parent's ranks; color < 0 means this rank takes no part).
  ProcessGroupHCCL(ProcessGroupHCCL& parent, int color, int key, int rank, int size)
      : c10d::Backend(rank, size), device_(parent.device_), timeout_ms_(parent.timeout_ms_) {
    hcclConfig_t cfg = HCCL_CONFIG_INITIALIZER;
    cfg.timeoutMs = (int)std::min<int64_t>(std::max<int64_t>(timeout_ms_, 1), INT32_MAX);
    hcclResult_t r = hcclCommSplit(parent.comm(), color, key, &comm_, &cfg);
    if (r != hcclSuccess) throw_hccl(parent.comm(), r, "hcclCommSplit");
    TORCH_CHECK(comm_ != nullptr, "hccl: split produced no communicator for this rank");
    start_watcher();
  }

  ~ProcessGroupHCCL() override {
    try {
      shutdown();
    } catch (...) {
    }
  }

  const std::string getBackendName() const override { return "hccl"; }
  bool supportsSplitting() const override { return false; }
  hcclComm_t comm() {
    TORCH_CHECK(comm_, "hccl: the process group was shut down");
    return comm_;
  }
  int device() const { return device_; }

  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_ms_ = timeout.count();
    hcclCommSetTimeout(comm(), (int)std::min<int64_t>(std::max<int64_t>(timeout_ms_, 1), INT32_MAX));
  }

  // Normal end: the queued work finishes (or fails within the timeout), then
  // the communicator and its shared memory are released.
  void shutdown() override {
    std::lock_guard<std::mutex> g(life_);
    if (!comm_) return;
    stop_watcher();
    hcclResult_t async = hcclSuccess;
    hcclCommGetAsyncError(comm_, &async);
    hcclComm_t c;
    {
      std::lock_guard<std::mutex> g2(ref_->mu);
      c = comm_;
      comm_ = nullptr;
    }
    if (async != hcclSuccess) hcclCommAbort(c);
    else hcclCommDestroy(c);
  }

  void abort() override {
    std::lock_guard<std::mutex> g(life_);
    hcclComm_t c;
    {
      std::lock_guard<std::mutex> g2(ref_->mu);
      c = comm_;
      comm_ = nullptr;
    }
    if (!c) return;
    hcclCommAbort(c);  // fails the queued work, which the watcher reports
    stop_watcher();
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    auto t = single(tensors, "broadcast");
    auto w = as_wire(t);
    return run(
        OpType::BROADCAST, {t}, {w}, "hcclBroadcast",
        [&](hcclStream_t s) {
          return hcclBroadcast(w.data_ptr(), w.data_ptr(), w.numel(), to_hccl_dtype(w.scalar_type()),
                               (int)opts.rootRank, comm(), s);
        },
        {}, !opts.asyncOp);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    auto t = single(tensors, "allreduce");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "hccl: allreduce of sparse tensors is not supported");
    return allreduce_list({t}, opts.reduceOp, OpType::ALLREDUCE, !opts.asyncOp);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    TORCH_CHECK_VALUE(!tensors.empty(), "hccl: allreduce_coalesced needs at least one tensor");
    for (auto& t : tensors) check_tensor(t, "allreduce_coalesced", tensors[0]);
    return allreduce_list(tensors, opts.reduceOp, OpType::ALLREDUCE_COALESCED, !opts.asyncOp);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    auto t = single(tensors, "reduce");
    hcclRedOp_t op = to_hccl_op(opts.reduceOp, t);
    if (opts.reduceOp == ReduceOp::PREMUL_SUM) apply_premul(opts.reduceOp, t);
    auto w = as_wire(t);
    return run(OpType::REDUCE, {t}, {w}, "hcclReduce", [&](hcclStream_t s) {
      return hcclReduce(w.data_ptr(), w.data_ptr(), w.numel(), to_hccl_dtype(w.scalar_type()), op,
                        (int)opts.rootRank, comm(), s);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    auto in = single(inputs, "allgather");
    TORCH_CHECK_VALUE(outputs.size() == 1, "hccl: allgather takes one output list per process, got ",
                      outputs.size());
    auto& outs = outputs[0];
    check_list(outs, in, "allgather output");
    auto flat = at::empty({(int64_t)size_ * in.numel()}, in.options());
    auto wi = as_wire(in), wf = as_wire(flat);
    std::vector<at::Tensor> keep = {in, flat};
    return run(
        OpType::ALLGATHER, outs, keep, "hcclAllGather",
        [&](hcclStream_t s) {
          return hcclAllGather(wi.data_ptr(), wf.data_ptr(), wi.numel(), to_hccl_dtype(wi.scalar_type()), comm(),
                               s);
        },
        [&] {
          for (int i = 0; i < size_; i++)
            outs[i].view({-1}).copy_(flat.narrow(0, i * in.numel(), in.numel()));
        });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& opts) override {
    check_tensor(in, "allgather_into_tensor", in);
    check_tensor(out, "allgather_into_tensor", in);
    TORCH_CHECK_VALUE(out.numel() == in.numel() * size_, "hccl: allgather_into_tensor: output has ", out.numel(),
                      " elements, expected input numel * world size = ", in.numel() * size_);
    auto wi = as_wire(in), wo = as_wire(out);
    return run(OpType::_ALLGATHER_BASE, {out}, {in}, "hcclAllGather", [&](hcclStream_t s) {
      return hcclAllGather(wi.data_ptr(), wo.data_ptr(), wi.numel(), to_hccl_dtype(wi.scalar_type()), comm(), s);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override {
    // As gloo: outputs[r][k] receives rank r's input k.
    TORCH_CHECK_VALUE(!inputs.empty() && (int64_t)outputs.size() == size_,
                      "hccl: allgather_coalesced needs one output list per rank (", size_, "), got ",
                      outputs.size());
    std::vector<at::Tensor> flats, outs, keep;
    for (size_t k = 0; k < inputs.size(); k++) check_tensor(inputs[k], "allgather_coalesced", inputs[0]);
    for (int r = 0; r < size_; r++) {
      TORCH_CHECK_VALUE(outputs[r].size() == inputs.size(), "hccl: allgather_coalesced output list ", r,
                        " has ", outputs[r].size(), " tensors, expected one per input (", inputs.size(), ")");
      for (size_t k = 0; k < inputs.size(); k++) {
        TORCH_CHECK_VALUE(outputs[r][k].numel() == inputs[k].numel() &&
                              outputs[r][k].scalar_type() == inputs[k].scalar_type() &&
                              outputs[r][k].device() == inputs[k].device(),
                          "hccl: allgather_coalesced output [", r, "][", k,
                          "] must match input ", k, " in size, dtype and device");
        outs.push_back(outputs[r][k]);
      }
    }
    for (size_t k = 0; k < inputs.size(); k++) {
      flats.push_back(at::empty({(int64_t)size_ * inputs[k].numel()}, inputs[k].options()));
      keep.push_back(inputs[k]);
      keep.push_back(flats.back());
    }
    return run(
        OpType::ALLGATHER_COALESCED, outs, keep, "hcclAllGather",
        [&](hcclStream_t s) {
          return grouped([&]() -> hcclResult_t {
            for (size_t k = 0; k < inputs.size(); k++) {
              auto wi = as_wire(inputs[k]), wf = as_wire(flats[k]);
              hcclResult_t r = hcclAllGather(wi.data_ptr(), wf.data_ptr(), wi.numel(),
                                             to_hccl_dtype(wi.scalar_type()), comm(), s);
              if (r != hcclSuccess) return r;
            }
            return hcclSuccess;
          });
        },
        [&] {
          for (size_t k = 0; k < inputs.size(); k++) {
            int64_t n = inputs[k].numel();
            for (int i = 0; i < size_; i++) outputs[i][k].view({-1}).copy_(flats[k].narrow(0, i * n, n));
          }
        });
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                      "hccl: allgather_into_tensor_coalesced needs as many outputs as inputs");
    for (size_t k = 0; k < inputs.size(); k++) {
      check_tensor(inputs[k], "allgather_into_tensor_coalesced", inputs[0]);
      check_tensor(outputs[k], "allgather_into_tensor_coalesced", inputs[0]);
      TORCH_CHECK_VALUE(outputs[k].numel() == inputs[k].numel() * size_,
                        "hccl: allgather_into_tensor_coalesced: output ", k, " has ", outputs[k].numel(),
                        " elements, expected ", inputs[k].numel() * size_);
    }
    return run(OpType::COALESCED, outputs, inputs, "hcclAllGather", [&](hcclStream_t s) {
      return grouped([&]() -> hcclResult_t {
        for (size_t k = 0; k < inputs.size(); k++) {
          auto wi = as_wire(inputs[k]), wo = as_wire(outputs[k]);
          hcclResult_t r = hcclAllGather(wi.data_ptr(), wo.data_ptr(), wi.numel(), to_hccl_dtype(wi.scalar_type()),
                                         comm(), s);
          if (r != hcclSuccess) return r;
        }
        return hcclSuccess;
      });
    });
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    auto in = single(inputs, "gather");
    int root = (int)opts.rootRank;
    std::vector<at::Tensor> outs;
    if (rank_ == root) {
      TORCH_CHECK_VALUE(outputs.size() == 1, "hccl: gather takes one output list on the root");
      check_list(outputs[0], in, "gather output");
      outs = outputs[0];
    } else {
      TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                        "hccl: gather: only the root passes output tensors");
    }
    auto wi = as_wire(in);
    auto dt = to_hccl_dtype(wi.scalar_type());
    return run(
        OpType::GATHER, outs, {in}, "gather (hcclSend/hcclRecv)",
        [&](hcclStream_t s) {
          return grouped([&]() -> hcclResult_t {
            if (rank_ != root) return hcclSend(wi.data_ptr(), wi.numel(), dt, root, comm(), s);
            for (int i = 0; i < size_; i++) {
              if (i == root) continue;
              auto wo = as_wire(outs[i]);
              hcclResult_t r = hcclRecv(wo.data_ptr(), wo.numel(), dt, i, comm(), s);
              if (r != hcclSuccess) return r;
            }
            return hcclSuccess;
          });
        },
        [&] {
          if (rank_ == root) outs[root].copy_(in);
        });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    auto out = single(outputs, "scatter");
    int root = (int)opts.rootRank;
    std::vector<at::Tensor> ins;
    if (rank_ == root) {
      TORCH_CHECK_VALUE(inputs.size() == 1, "hccl: scatter takes one input list on the root");
      check_list(inputs[0], out, "scatter input");
      ins = inputs[0];
    } else {
      TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                        "hccl: scatter: only the root passes input tensors");
    }
    auto wo = as_wire(out);
    auto dt = to_hccl_dtype(wo.scalar_type());
    return run(
        OpType::SCATTER, {out}, ins, "scatter (hcclSend/hcclRecv)",
        [&](hcclStream_t s) {
          return grouped([&]() -> hcclResult_t {
            if (rank_ != root) return hcclRecv(wo.data_ptr(), wo.numel(), dt, root, comm(), s);
            for (int i = 0; i < size_; i++) {
              if (i == root) continue;
              auto wi = as_wire(ins[i]);
              hcclResult_t r = hcclSend(wi.data_ptr(), wi.numel(), dt, i, comm(), s);
              if (r != hcclSuccess) return r;
            }
            return hcclSuccess;
          });
        },
        [&] {
          if (rank_ == root) out.copy_(ins[root]);
        });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    auto out = single(outputs, "reduce_scatter");
    TORCH_CHECK_VALUE(inputs.size() == 1, "hccl: reduce_scatter takes one input list per process");
    check_list(inputs[0], out, "reduce_scatter input");
    hcclRedOp_t op = to_hccl_op(opts.reduceOp, out);
    auto flat = at::empty({(int64_t)size_ * out.numel()}, out.options());
    for (int i = 0; i < size_; i++) flat.narrow(0, i * out.numel(), out.numel()).copy_(inputs[0][i].view({-1}));
    apply_premul(opts.reduceOp, flat);
    auto wf = as_wire(flat), wo = as_wire(out);
    return run(OpType::REDUCE_SCATTER, {out}, {flat}, "hcclReduceScatter", [&](hcclStream_t s) {
      return hcclReduceScatter(wf.data_ptr(), wo.data_ptr(), wo.numel(), to_hccl_dtype(wo.scalar_type()), op,
                               comm(), s);
    });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& opts) override {
    check_tensor(in, "reduce_scatter_tensor", in);
    check_tensor(out, "reduce_scatter_tensor", in);
    TORCH_CHECK_VALUE(in.numel() == out.numel() * size_, "hccl: reduce_scatter_tensor: input has ", in.numel(),
                      " elements, expected output numel * world size = ", out.numel() * size_);
    return reduce_scatter_list({out}, {in}, opts.reduceOp, OpType::_REDUCE_SCATTER_BASE);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                      "hccl: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
    for (size_t k = 0; k < inputs.size(); k++) {
      check_tensor(inputs[k], "reduce_scatter_tensor_coalesced", inputs[0]);
      check_tensor(outputs[k], "reduce_scatter_tensor_coalesced", inputs[0]);
      TORCH_CHECK_VALUE(inputs[k].numel() == outputs[k].numel() * size_,
                        "hccl: reduce_scatter_tensor_coalesced: input ", k, " has ", inputs[k].numel(),
                        " elements, expected ", outputs[k].numel() * size_);
    }
    return reduce_scatter_list(outputs, inputs, opts.reduceOp, OpType::REDUCE_SCATTER_TENSOR_COALESCED);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& opts) override {
    check_tensor(in, "all_to_all_single", in);
    check_tensor(out, "all_to_all_single", in);
    auto wi = as_wire(in), wo = as_wire(out);
    auto dt = to_hccl_dtype(wi.scalar_type());
    if (out_splits.empty() && in_splits.empty()) {
      TORCH_CHECK_VALUE(in.numel() == out.numel() && in.numel() % size_ == 0,
                        "hccl: all_to_all_single: input and output must have the same number of elements, "
                        "divisible by the world size (got ", in.numel(), " and ", out.numel(), ")");
      return run(OpType::ALLTOALL_BASE, {out}, {in}, "hcclAlltoAll", [&](hcclStream_t s) {
        return hcclAlltoAll(wi.data_ptr(), wo.data_ptr(), wi.numel() / size_, dt, comm(), s);
      });
    }
    auto offsets = [&](std::vector<int64_t>& splits, const at::Tensor& t, const char* which) {
      TORCH_CHECK_VALUE(t.dim() >= 1, "hccl: all_to_all_single needs tensors of at least one dimension");
      int64_t row = t.size(0) ? t.numel() / t.size(0) : 0;
      if (splits.empty()) {
        TORCH_CHECK_VALUE(t.size(0) % size_ == 0, "hccl: all_to_all_single: ", which, " dim 0 (", t.size(0),
                          ") is not divisible by the world size");
        splits.assign(size_, t.size(0) / size_);
      }
      TORCH_CHECK_VALUE((int)splits.size() == size_, "hccl: all_to_all_single: ", which, " split sizes have ",
                        splits.size(), " entries, expected ", size_);
      std::vector<std::pair<int64_t, int64_t>> r;  // element offset, count
      int64_t off = 0;
      for (int64_t s : splits) {
        TORCH_CHECK_VALUE(s >= 0, "hccl: all_to_all_single: negative split size");
        r.emplace_back(off * row, s * row);
        off += s;
      }
      TORCH_CHECK_VALUE(off == t.size(0), "hccl: all_to_all_single: ", which, " split sizes sum to ", off,
                        ", but dim 0 is ", t.size(0));
      return r;
    };
    auto ins = offsets(in_splits, in, "input");
    auto outs = offsets(out_splits, out, "output");
    TORCH_CHECK_VALUE(ins[rank_].second == outs[rank_].second, "hccl: all_to_all_single: this rank sends ",
                      ins[rank_].second, " elements to itself but expects ", outs[rank_].second);
    size_t es = in.element_size();
    char* ip = (char*)in.data_ptr();
    char* op = (char*)out.data_ptr();
    int64_t mult = in.is_complex() ? 2 : 1;
    return run(
        OpType::ALLTOALL_BASE, {out}, {in}, "all_to_all_single (hcclSend/hcclRecv)",
        [&](hcclStream_t s) {
          return grouped([&]() -> hcclResult_t {
            for (int i = 0; i < size_; i++) {
              if (i == rank_) continue;
              hcclResult_t r = hcclSend(ip + ins[i].first * es, ins[i].second * mult, dt, i, comm(), s);
              if (r == hcclSuccess) r = hcclRecv(op + outs[i].first * es, outs[i].second * mult, dt, i, comm(), s);
              if (r != hcclSuccess) return r;
            }
            return hcclSuccess;
          });
        },
        [&] {
          if (ins[rank_].second)
            out.view({-1}).narrow(0, outs[rank_].first, outs[rank_].second)
                .copy_(in.view({-1}).narrow(0, ins[rank_].first, ins[rank_].second));
        });
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK_VALUE((int)outputs.size() == size_ && (int)inputs.size() == size_,
                      "hccl: all_to_all needs world-size (", size_, ") input and output tensors");
    for (int i = 0; i < size_; i++) {
      check_tensor(inputs[i], "all_to_all", inputs[0]);
      check_tensor(outputs[i], "all_to_all", inputs[0]);
    }
    TORCH_CHECK_VALUE(inputs[rank_].numel() == outputs[rank_].numel(), "hccl: all_to_all: this rank sends ",
                      inputs[rank_].numel(), " elements to itself but expects ", outputs[rank_].numel());
    auto dt = to_hccl_dtype(as_wire(inputs[0]).scalar_type());
    return run(
        OpType::ALLTOALL, outputs, inputs, "all_to_all (hcclSend/hcclRecv)",
        [&](hcclStream_t s) {
          return grouped([&]() -> hcclResult_t {
            for (int i = 0; i < size_; i++) {
              if (i == rank_) continue;
              auto wi = as_wire(inputs[i]), wo = as_wire(outputs[i]);
              hcclResult_t r = hcclSend(wi.data_ptr(), wi.numel(), dt, i, comm(), s);
              if (r == hcclSuccess) r = hcclRecv(wo.data_ptr(), wo.numel(), dt, i, comm(), s);
              if (r != hcclSuccess) return r;
            }
            return hcclSuccess;
          });
        },
        [&] { outputs[rank_].copy_(inputs[rank_]); });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    auto t = single(tensors, "send");
    auto w = as_wire(t);
    return run(OpType::SEND, {t}, {}, "hcclSend", [&](hcclStream_t s) {
      return hcclSend(w.data_ptr(), w.numel(), to_hccl_dtype(w.scalar_type()), dst, comm(), s);
    });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    auto t = single(tensors, "recv");
    auto w = as_wire(t);
    return run(OpType::RECV, {t}, {}, "hcclRecv", [&](hcclStream_t s) {
      return hcclRecv(w.data_ptr(), w.numel(), to_hccl_dtype(w.scalar_type()), src, comm(), s);
    });
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    TORCH_CHECK_VALUE(false, "hccl: recv from any source is not supported (pass src=)");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    // On the card's queue, so it also waits for the work queued before it.
    auto marker = at::empty({0}, at::TensorOptions().device(at::Device(c10::DeviceType::HPU, (c10::DeviceIndex)device_)));
    return run(OpType::BARRIER, {}, {marker}, "hcclBarrier", [&](hcclStream_t s) {
      return hcclBarrier(comm(), s);
    });
  }

 private:
  // ---- argument checks ----
  at::Tensor single(std::vector<at::Tensor>& ts, const char* what) {
    TORCH_CHECK_VALUE(ts.size() == 1, "hccl: ", what, " takes exactly one tensor per process, got ", ts.size());
    check_tensor(ts[0], what, ts[0]);
    return ts[0];
  }

  void check_tensor(const at::Tensor& t, const char* what, const at::Tensor& ref) {
    TORCH_CHECK_VALUE(t.defined(), "hccl: ", what, ": undefined tensor");
    TORCH_CHECK_VALUE(t.device().is_cpu() || t.device().type() == c10::DeviceType::HPU, "hccl: ", what,
                      ": tensors must be on hpu (or the CPU), got ", t.device());
    TORCH_CHECK_VALUE(t.device() == ref.device(), "hccl: ", what, ": all tensors must be on one device, got ",
                      t.device(), " and ", ref.device());
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "hccl: ", what, ": only dense tensors are supported");
    TORCH_CHECK_VALUE(t.is_contiguous(t.suggest_memory_format()), "hccl: ", what, ": tensors must be contiguous");
    TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), "hccl: ", what, ": tensors must have one dtype, got ",
                     t.scalar_type(), " and ", ref.scalar_type());
    if (!t.is_complex()) to_hccl_dtype(t.scalar_type());
    else to_hccl_dtype(at::view_as_real(t).scalar_type());
  }

  void check_list(const std::vector<at::Tensor>& list, const at::Tensor& ref, const char* what) {
    TORCH_CHECK_VALUE((int)list.size() == size_, "hccl: ", what, " list has ", list.size(),
                      " tensors, expected the world size ", size_);
    for (auto& t : list) {
      check_tensor(t, what, ref);
      TORCH_CHECK_VALUE(t.numel() == ref.numel(), "hccl: ", what, ": tensor of ", t.numel(),
                        " elements where ", ref.numel(), " are expected");
    }
  }

  // ---- execution ----
  template <typename F>
  hcclResult_t grouped(F&& body) {
    hcclResult_t r = hcclGroupStart();
    if (r != hcclSuccess) return r;
    hcclResult_t b = body();
    r = hcclGroupEnd();
    return b != hcclSuccess ? b : r;
  }

  c10::intrusive_ptr<c10d::Work> allreduce_list(std::vector<at::Tensor> ts, const ReduceOp& rop, OpType type,
                                                bool blocking) {
    std::vector<hcclRedOp_t> ops;
    for (auto& t : ts) ops.push_back(to_hccl_op(rop, t));
    for (auto& t : ts) apply_premul(rop, t);
    return run(type, ts, {}, "hcclAllReduce", [&](hcclStream_t s) {
      auto one = [&](size_t k) {
        auto w = as_wire(ts[k]);
        return hcclAllReduce(w.data_ptr(), w.data_ptr(), w.numel(), to_hccl_dtype(w.scalar_type()), ops[k], comm(),
                             s);
      };
      if (ts.size() == 1) return one(0);
      return grouped([&]() -> hcclResult_t {
        for (size_t k = 0; k < ts.size(); k++) {
          hcclResult_t r = one(k);
          if (r != hcclSuccess) return r;
        }
        return hcclSuccess;
      });
    }, {}, blocking);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_list(std::vector<at::Tensor> outs, std::vector<at::Tensor> ins,
                                                     const ReduceOp& rop, OpType type) {
    std::vector<hcclRedOp_t> ops;
    for (auto& t : outs) ops.push_back(to_hccl_op(rop, t));
    if (rop == ReduceOp::PREMUL_SUM)
      for (auto& t : ins) {
        t = t.clone();  // the caller's input stays as it was
        apply_premul(rop, t);
      }
    return run(type, outs, ins, "hcclReduceScatter", [&](hcclStream_t s) {
      return grouped([&]() -> hcclResult_t {
        for (size_t k = 0; k < outs.size(); k++) {
          auto wi = as_wire(ins[k]), wo = as_wire(outs[k]);
          hcclResult_t r = hcclReduceScatter(wi.data_ptr(), wo.data_ptr(), wo.numel(),
                                             to_hccl_dtype(wo.scalar_type()), ops[k], comm(), s);
          if (r != hcclSuccess) return r;
        }
        return hcclSuccess;
      });
    });
  }

  // Issues `issue` on the card's current stream (hpu tensors) or on the
  // calling thread (CPU tensors), then `after` (copies out of staging
  // buffers: stream-ordered on hpu). `keep` stays alive until completion.
  // `blocking` (the caller waits at once: torch.distributed's async_op=False)
  // runs a collective on hpu tensors on the calling thread too, once the
  // card has run what was queued before it: the same order and the same
  // wait, without handing the collective to the card's worker thread and
  // its completion back through the watcher (at 1 MB those hand-offs cost
  // more than the reduction on a 2-core host).
  c10::intrusive_ptr<c10d::Work> run(OpType type, std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
                                     const char* what, const std::function<hcclResult_t(hcclStream_t)>& issue,
                                     const std::function<void()>& after = {}, bool blocking = false) {
    hcclComm_t c = comm();
    int dev = -1;
    for (auto* list : {&outputs, &keep})
      for (auto& t : *list)
        if (t.defined() && t.device().type() == c10::DeviceType::HPU && dev < 0) dev = t.device().index();
    auto work = c10::make_intrusive<WorkHCCL>(rank_, type, outputs);
    if (dev >= 0 && blocking && !after) {
      hpu_stream_t stream = current_stream((c10::DeviceIndex)dev);
      if (hpu_stream_synchronize(stream) != HPU_SUCCESS)
        C10_THROW_ERROR(DistBackendError, c10::str("hccl ", what, ": the card failed before the collective: ",
                                                   hpu_last_error()));
      dev = -1;  // the card is idle: run as on host memory (HCCL's NULL stream)
    }
    if (dev < 0) {
      hcclResult_t r = issue(nullptr);  // the c10d bindings released the GIL
      if (r != hcclSuccess) throw_hccl(c, r, what);
      if (after) after();
      work->complete(nullptr);
      return work;
    }
    hpu_stream_t stream = current_stream((c10::DeviceIndex)dev);
    hcclResult_t r = issue(&stream);
    if (r != hcclSuccess) throw_hccl(c, r, what);
    if (after) after();
    hpu_event_t ev = nullptr;
    HPU_CHECK(hpu_event_create(&ev, 0));
    hpu_status_t st = hpu_event_record(ev, stream);
    if (st != HPU_SUCCESS) {
      hpu_event_destroy(ev);
      HPU_CHECK(st);
    }
    bool on_card = true;
    for (auto& t : outputs)
      if (t.defined() && t.device().type() != c10::DeviceType::HPU) on_card = false;
    if (on_card) work->complete_future_queued();
    work->set_card(stream, ref_);
    {
      std::lock_guard<std::mutex> g(qmutex_);
      queue_.push_back(Pending{work, ev, std::move(keep)});
    }
    qcv_.notify_one();
    return work;
  }

  struct Pending {
    c10::intrusive_ptr<WorkHCCL> work;
    hpu_event_t event;
    std::vector<at::Tensor> keep;
  };

  void start_watcher() {
    stop_ = false;
    watcher_ = std::thread([this] { watch(); });
  }

  void stop_watcher() {
    {
      std::lock_guard<std::mutex> g(qmutex_);
      stop_ = true;
    }
    qcv_.notify_all();
    if (watcher_.joinable()) {
      if (watcher_.get_id() == std::this_thread::get_id()) watcher_.detach();
      else watcher_.join();
    }
  }

  // Completes works in issue order once their event has passed; the first
  // failure of the communicator (a dead or stuck peer: HCCL gives up within
  // the timeout) fails that work and every later one.
  void watch() {
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> lock(qmutex_);
        qcv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        p = std::move(queue_.front());
        queue_.pop_front();
      }
      hpu_status_t st = hpu_event_synchronize(p.event);
      std::string card_error = st == HPU_SUCCESS ? "" : hpu_last_error();
      hpu_event_destroy(p.event);
      std::exception_ptr error = collective_error(*ref_, rank_, p.work->retrieveOpType(), card_error);
      try {
        p.work->complete(error);
      } catch (...) {
        // A failing future callback must not kill the watcher.
      }
      p.keep.clear();
    }
  }

  std::shared_ptr<CommRef> ref_ = std::make_shared<CommRef>();
  hcclComm_t& comm_ = ref_->comm;
  int device_;
  int64_t timeout_ms_;
  std::mutex life_;
  std::mutex qmutex_;
  std::condition_variable qcv_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> hccl_backend_create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int size, int64_t timeout_ms, int device) {
  return c10::make_intrusive<ProcessGroupHCCL>(store, rank, size, timeout_ms, device);
}

c10::intrusive_ptr<c10d::Backend> hccl_backend_split(const c10::intrusive_ptr<c10d::Backend>& parent, int color,
                                                     int key, int rank, int size) {
  auto* p = dynamic_cast<ProcessGroupHCCL*>(parent.get());
  TORCH_CHECK_VALUE(p, "hccl: can only split an hccl backend");
  if (color >= 0) return c10::make_intrusive<ProcessGroupHCCL>(*p, color, key, rank, size);
  hcclComm_t none = nullptr;
  hcclResult_t r = hcclCommSplit(p->comm(), HCCL_SPLIT_NOCOLOR, key, &none, nullptr);
  if (r != hcclSuccess) throw_hccl(p->comm(), r, "hcclCommSplit");
  return {};
}

int hccl_backend_device(const c10d::Backend* backend) {
  auto* p = dynamic_cast<const ProcessGroupHCCL*>(backend);
  return p ? p->device() : -1;
}

}  // namespace habana_torch

#endif  // HPU_WITH_HCCL
