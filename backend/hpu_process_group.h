// The "hccl" process-group backend's shared parts: the Work its collectives
// return, how a collective's failure is told, and the entry points the
// Python bindings call. hpu_process_group.cpp holds the c10d::Backend,
// hpu_process_group_work.cpp the Work, hpu_process_group_ops.cpp the c10d
// ops registered for the HPU key, hpu_process_group_bindings.cpp the module
// functions torch.distributed's Python side calls.
//
// A collective on hpu tensors is enqueued on the card's current stream
// (behind the compute already queued; lazy mode flushes the pending graph at
// that enqueue) and returns at once. A watcher thread per backend waits for
// an event recorded behind it and then completes the Work and its Future
// (with the tensor list, as DDP's comm hooks expect) or fails them with
// HCCL's error text; a wait() that comes first synchronizes the card and
// completes the Work itself. A blocking call (async_op=False) on hpu
// tensors, and every collective on CPU tensors, runs synchronously on the
// calling thread (HCCL's NULL stream), the former once the card is idle.
#pragma once
#ifdef HPU_WITH_HCCL

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hpu_common.h"

extern "C" {
#include "hccl.h"
}

namespace habana_torch {

// HCCL's error string plus the communicator's last error text.
std::string hccl_message(hcclComm_t comm, hcclResult_t r);
// Bad arguments are ValueError; everything else (peer died, timed out,
// aborted, system errors) is torch.distributed.DistBackendError.
[[noreturn]] void throw_hccl(hcclComm_t comm, hcclResult_t r, const char* what);

// The communicator as works see it: the backend clears `comm` under `mu`
// when it shuts down or aborts, so a work that outlives its backend never
// touches a destroyed communicator.
struct CommRef {
  std::mutex mu;
  hcclComm_t comm = nullptr;
};

// How a collective on a card ended, once its place in the card queue has
// passed: the communicator's failure if it has one (a dead or stuck peer:
// HCCL gives up within the timeout), else the card's error, else success.
std::exception_ptr collective_error(CommRef& ref, int rank, c10d::OpType type, const std::string& card_error);

class WorkHCCL : public c10d::Work {
 public:
  WorkHCCL(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // The card's queue is in order: work queued after this call on the card
  // runs after the collective, so there is nothing to do.
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // A collective on card tensors: its future completes as soon as it is
  // queued, as a CUDA future does (see hpu_process_group_work.cpp).
  void complete_future_queued();
  // wait() may then finish the work itself (see drive()).
  void set_card(hpu_stream_t stream, std::shared_ptr<CommRef> ref);
  // The first completion wins: wait() and the watcher may both get here.
  void complete(std::exception_ptr error);

 private:
  void drive();

  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool future_queued_ = false;  // set before the watcher can see the work
  hpu_stream_t stream_{};
  std::shared_ptr<CommRef> card_ref_;  // set for works on card tensors only
};

// A backend over a new communicator: rank 0 puts HCCL's unique id in the
// store, the others read it there. Blocks until every rank has joined.
c10::intrusive_ptr<c10d::Backend> hccl_backend_create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int size, int64_t timeout_ms, int device);
// hcclCommSplit of an hccl backend (collective over its ranks); color < 0:
// this rank takes no part and gets a null backend.
c10::intrusive_ptr<c10d::Backend> hccl_backend_split(const c10::intrusive_ptr<c10d::Backend>& parent, int color,
                                                     int key, int rank, int size);
// The card of an hccl backend, or -1 for any other backend.
int hccl_backend_device(const c10d::Backend* backend);

}  // namespace habana_torch

#endif  // HPU_WITH_HCCL
