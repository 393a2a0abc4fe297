// The Work of the "hccl" process-group backend: completion, its Future,
// and wait() driving the card itself (hpu_process_group.h has the overview).
#ifdef HPU_WITH_HCCL

#include "hpu_process_group.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

namespace habana_torch {

std::string hccl_message(hcclComm_t comm, hcclResult_t r) {
  const char* last = hcclGetLastError(comm);
  std::string msg = hcclGetErrorString(r);
  if (last && *last) msg += std::string(": ") + last;
  return msg;
}

// Bad arguments are ValueError; everything else (peer died, timed out,
// aborted, system errors) is torch.distributed.DistBackendError.
[[noreturn]] void throw_hccl(hcclComm_t comm, hcclResult_t r, const char* what) {
  std::string msg = std::string("hccl ") + what + " failed: " + hccl_message(comm, r);
  if (r == hcclInvalidArgument || r == hcclInvalidUsage) TORCH_CHECK_VALUE(false, msg);
  C10_THROW_ERROR(DistBackendError, msg);
}

std::exception_ptr collective_error(CommRef& ref, int rank, c10d::OpType type, const std::string& card_error) {
  hcclResult_t async = hcclSuccess;
  std::string msg;
  {
    std::lock_guard<std::mutex> g(ref.mu);
    if (ref.comm && hcclCommGetAsyncError(ref.comm, &async) == hcclSuccess && async != hcclSuccess)
      msg = hccl_message(ref.comm, async);
    else if (!ref.comm)
      msg = "the process group was aborted";
  }
  if (msg.empty() && !card_error.empty()) msg = "the card reported: " + card_error;
  if (msg.empty()) return nullptr;
  try {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("hccl ", c10d::opTypeToString(type), " failed on rank ", rank, ": ", msg));
  } catch (...) {
    return std::current_exception();
  }
}

WorkHCCL::WorkHCCL(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<at::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool WorkHCCL::isCompleted() {
  std::lock_guard<std::mutex> g(mutex_);
  return completed_;
}

bool WorkHCCL::isSuccess() const {
  std::lock_guard<std::mutex> g(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr WorkHCCL::exception() const {
  std::lock_guard<std::mutex> g(mutex_);
  return exception_;
}

bool WorkHCCL::wait(std::chrono::milliseconds timeout) {
  bool untimed = timeout == kNoTimeout || timeout.count() < 0;
  if (untimed && card_ref_ && !isCompleted()) drive();
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [&] { return completed_; };
  if (untimed) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, timeout, done)) {
    C10_THROW_ERROR(DistBackendError, c10::str("hccl: ", c10d::opTypeToString(opType_),
                                               " did not complete within ", timeout.count(), " ms"));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

// A collective on card tensors: its future completes as soon as it is
// queued, as a CUDA future does. Its value is the card tensors, and
// everything done with them (DDP copying the bucket back into the grads,
// a comm hook's division, a host read that synchronizes) is queued on the
// same card behind the collective. DDP waits for this future at the end
// of every backward: completing it at the card's pace stopped the host
// there until the card had run the whole step (in lazy mode the step's
// graph only starts at that collective), so host recording and card
// execution never overlapped. wait() still blocks until the collective
// ran; a failure reaches the future's users through the communicator
// (the next collective and the card's next synchronize raise it).
void WorkHCCL::complete_future_queued() {
  future_queued_ = true;
  future_->markCompleted(c10::IValue(outputs_));
}

void WorkHCCL::set_card(hpu_stream_t stream, std::shared_ptr<CommRef> ref) {
  stream_ = stream;
  card_ref_ = std::move(ref);
}

void WorkHCCL::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> g(mutex_);
    if (completed_) return;
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
  if (future_queued_) return;
  if (error) future_->setError(error);
  else future_->markCompleted(c10::IValue(outputs_));
}

// Synchronizes the card on the waiting thread, as torch.hpu.synchronize
// does: a queued task nobody has started yet (the collective itself, when
// wait() follows the call) runs right here. Leaving it to the watcher
// cost three thread hand-offs per blocking collective (host -> queue
// worker -> watcher -> host): about half of a 1 MB all_reduce's time
// on 2 cores.
// Work queued after the collective is waited for too.
void WorkHCCL::drive() {
  hpu_status_t st = hpu_stream_synchronize(stream_);
  complete(collective_error(*card_ref_, rank_, opType_, st == HPU_SUCCESS ? "" : hpu_last_error()));
}

}  // namespace habana_torch

#endif  // HPU_WITH_HCCL
