// The cards in torch.profiler: a Kineto child profiler (the interface
// Gaudi's own bridge implements) that turns the C core's device trace
// events (hpu/trace.h) into Kineto activities.
//
//  - Each card is a process of the trace, "HPU <n>" (pid 100 + n: Kineto
//    labels pids 0-15 as GPUs in every trace), with one lane (thread) per
//    engine: MME, TPC, DMA, HCCL. The card's index is also in each event's
//    "device" argument.
//  - Kineto tells every child session which host op is current through
//    push/popCorrelationId, on the thread that runs the op; the session
//    hands the id to the C core, whose nodes and collective tasks carry it
//    to the thread that runs them.
//  - A device event is linked to its host op (so torch can put its time
//    under that op) and gets a flow arrow from a zero-length "hpu_launch"
//    event on the host op's thread, as a CUDA kernel gets one from its
//    cudaLaunchKernel.
//  - Device events are CONCURRENT_KERNEL / GPU_MEMCPY / COLLECTIVE_COMM
//    activities; HPU_OP (what ProfilerActivity.HPU asks for) is the host
//    side. Timestamps move from CLOCK_MONOTONIC to the Unix-epoch
//    nanoseconds torch's own events use.
//
// libfmt is not shipped as a library with torch; GenericTraceActivity's
// inline helpers use it, so it is compiled header-only here.
#define FMT_HEADER_ONLY
#include <kineto/libkineto.h>
#include <kineto/output_base.h>

#include <time.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hpu_common.h"

namespace habana_torch {
namespace {

using libkineto::ActivityType;

constexpr int kLaneBase = 1;    // lane (tid) of engine e is kLaneBase + e
constexpr int kCardPid = 100;  // card c is process (pid) kCardPid + c

// CLOCK_REALTIME - CLOCK_MONOTONIC, now.
int64_t epoch_offset_ns() {
  timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  return (int64_t(rt.tv_sec) - int64_t(mono.tv_sec)) * 1000000000LL + (rt.tv_nsec - mono.tv_nsec);
}

ActivityType device_type_of(int engine) {
  switch (engine) {
    case HPU_ENGINE_DMA: return ActivityType::GPU_MEMCPY;
    case HPU_ENGINE_HCCL: return ActivityType::COLLECTIVE_COMM;
    default: return ActivityType::CONCURRENT_KERNEL;
  }
}

// The host op stack of the calling thread, as Kineto pushes it.
thread_local std::vector<uint64_t> correlation_stack;

class HpuSession : public libkineto::IActivityProfilerSession {
 public:
  HpuSession() : buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {}

  void start() override {
    if (hpu_trace_start() != HPU_SUCCESS) {
      errors_.push_back(std::string("hpu trace: ") + hpu_last_error());
      status_ = libkineto::TraceStatus::ERROR;
      return;
    }
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    hpu_trace_stop();
    if (status_ == libkineto::TraceStatus::RECORDING) status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void pushCorrelationId(uint64_t id) override {
    correlation_stack.push_back(id);
    hpu_trace_set_correlation(id);
  }

  void popCorrelationId() override {
    if (!correlation_stack.empty()) correlation_stack.pop_back();
    hpu_trace_set_correlation(correlation_stack.empty() ? 0 : correlation_stack.back());
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_of,
                    int64_t start_ns, int64_t end_ns) override {
    hpu_trace_event_t* events = nullptr;
    uint64_t dropped = 0;
    size_t n = hpu_trace_collect(&events, &dropped);
    std::unique_ptr<hpu_trace_event_t, decltype(&std::free)> hold(events, &std::free);
    if (dropped)
      errors_.push_back("hpu trace: " + std::to_string(dropped) +
                        " device events did not fit (raise HPU_TRACE_MAX_EVENTS)");
    const int64_t offset = epoch_offset_ns();
    buffer_->span = libkineto::TraceSpan(start_ns, end_ns, "hpu");
    std::set<int> cards;
    for (size_t i = 0; i < n; i++) {
      const hpu_trace_event_t& e = events[i];
      cards.insert(e.device);
      const libkineto::ITraceActivity* host =
          e.correlation ? linked_of(static_cast<int32_t>(e.correlation)) : nullptr;
      const uint32_t flow = ++flows_;
      if (host) add_launch(logger, *host, flow);
      add_device(logger, e, offset, host, flow);
    }
    for (int card : cards) describe_card(logger, card, start_ns);
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

 private:
  // The host end of a flow arrow: zero length, on the host op's thread.
  void add_launch(libkineto::ActivityLogger& logger, const libkineto::ITraceActivity& host, uint32_t flow) {
    auto& act = emplace(ActivityType::HPU_OP, "hpu_launch");
    act.startTime = act.endTime = host.timestamp();
    act.device = static_cast<int32_t>(host.deviceId());
    act.resource = static_cast<int32_t>(host.resourceId());
    act.threadId = host.getThreadId();
    act.id = static_cast<int32_t>(flow);
    act.linked = &host;
    act.flow.id = flow;
    act.flow.type = libkineto::kLinkAsyncCpuGpu;
    act.flow.start = 1;
    logger.handleActivity(act);
  }

  void add_device(libkineto::ActivityLogger& logger, const hpu_trace_event_t& e, int64_t offset,
                  const libkineto::ITraceActivity* host, uint32_t flow) {
    auto& act = emplace(device_type_of(e.engine), e.name);
    act.startTime = static_cast<int64_t>(e.start_ns) + offset;
    act.endTime = static_cast<int64_t>(e.end_ns) + offset;
    act.device = kCardPid + e.device;
    act.resource = kLaneBase + e.engine;
    act.threadId = act.resource;
    act.id = static_cast<int32_t>(flow);
    act.linked = host;
    if (host) {
      act.flow.id = flow;
      act.flow.type = libkineto::kLinkAsyncCpuGpu;
      act.flow.start = 0;
    }
    act.addMetadataQuoted("engine", hpu_engine_name(e.engine));
    act.addMetadata("device", e.device);
    act.addMetadata("bytes", e.bytes);
    if (e.flops) act.addMetadata("flops", e.flops);
    if (e.correlation) act.addMetadata("host op", e.correlation);
    logger.handleActivity(act);
  }

  void describe_card(libkineto::ActivityLogger& logger, int card, int64_t time) {
    libkineto::DeviceInfo info{kCardPid + card, 0x1000000 + card, "HPU " + std::to_string(card),
                               "hpu:" + std::to_string(card)};
    logger.handleDeviceInfo(info, time);
    for (int e = 0; e < HPU_ENGINE_COUNT; e++) {
      libkineto::ResourceInfo lane{kLaneBase + e, e, kCardPid + card, hpu_engine_name(e)};
      logger.handleResourceInfo(lane, time);
    }
  }

  libkineto::GenericTraceActivity& emplace(ActivityType type, const std::string& name) {
    buffer_->emplace_activity(buffer_->span, type, name);
    return *buffer_->activities.back();
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::vector<std::string> errors_;
  uint32_t flows_ = 0x40000000;  // apart from the flow ids torch and CUPTI hand out
};

class HpuProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    // ProfilerActivity.HPU selects HPU_OP; a CPU-only profile records nothing here.
    if (!types.count(ActivityType::HPU_OP)) return nullptr;
    return std::make_unique<HpuSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"habana_torch"};
  std::set<ActivityType> activities_{ActivityType::HPU_OP};
};

}  // namespace

void register_profiler() {
  libkineto::api().registerProfilerFactory(
      []() -> std::unique_ptr<libkineto::IActivityProfiler> { return std::make_unique<HpuProfiler>(); });
}

}  // namespace habana_torch
