/* Result strings, the per-thread error text, environment helpers. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpu/clock.h"
#include "hpu/env.h"
#include "internal.h"
#include "wait_policy.h"

static _Thread_local char hccl_last_error[512];

hcclResult_t hccl_err(hcclResult_t r, const char *fmt, ...) {
  char buf[sizeof hccl_last_error];   /* the arguments may quote the previous message */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(hccl_last_error, buf, sizeof buf);
  if (getenv("HCCL_DEBUG") && r != hcclSuccess)
    fprintf(stderr, "[hccl pid %d] %s: %s\n", (int)getpid(), hcclGetErrorString(r), hccl_last_error);
  return r;
}

void hccl_clear_error(void) { hccl_last_error[0] = 0; }
const char *hccl_thread_error(void) { return hccl_last_error; }

void hccl_debug(const char *fmt, ...) {
  static atomic_int on = -1; /* read once; several threads may log at once */
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    v = getenv("HCCL_DEBUG") != NULL;
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  if (!v) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[hccl pid %d] %s\n", (int)getpid(), buf);
}

/* The C core's clock (hpu/clock.h), signed for HCCL's deadline arithmetic. */
int64_t hccl_now_ns(void) { return (int64_t)hpu_now_ns(); }

/* The C core's parser (hpu/env.h), its message made this thread's HCCL
 * error. */
hcclResult_t hccl_env_int(const char *name, int64_t dflt, int64_t min, int64_t max, int64_t *out) {
  long long v;
  if (hpu_env_int(name, dflt, min, max, &v) != HPU_SUCCESS)
    return hccl_err(hcclInvalidArgument, "%s", hpu_last_error());
  *out = v;
  return hcclSuccess;
}

hcclResult_t hccl_env_size(const char *name, uint64_t dflt, uint64_t min, uint64_t max, uint64_t *out) {
  unsigned long long v;
  if (hpu_env_size(name, dflt, min, max, &v) != HPU_SUCCESS)
    return hccl_err(hcclInvalidArgument, "%s", hpu_last_error());
  *out = v;
  return hcclSuccess;
}

/* HCCL_TIMEOUT in seconds (fractions allowed), default HCCL_DEFAULT_TIMEOUT_S;
 * at most about 31 years, so that deadlines in ns cannot overflow. */
hcclResult_t hccl_default_timeout_ms(int64_t *out) {
  double s;
  if (hpu_env_double("HCCL_TIMEOUT", HCCL_DEFAULT_TIMEOUT_S, 0.001, 1e9, &s) != HPU_SUCCESS)
    return hccl_err(hcclInvalidArgument, "%s", hpu_last_error());
  *out = (int64_t)(s * 1000.0);
  return hcclSuccess;
}

const char *hcclGetErrorString(hcclResult_t r) {
  switch (r) {
    case hcclSuccess: return "no error";
    case hcclUnhandledCudaError: return "unhandled device runtime error";
    case hcclSystemError: return "unhandled system error (run with HCCL_DEBUG=1 for details)";
    case hcclInternalError: return "internal error - please report this issue";
    case hcclInvalidArgument: return "invalid argument";
    case hcclInvalidUsage: return "invalid usage";
    case hcclRemoteError: return "remote process exited or there was a network error";
    case hcclInProgress: return "HCCL operation in progress";
    default: return "unknown result code";
  }
}

const char *hcclGetLastError(hcclComm_t comm) {
  if (hccl_last_error[0] == 0 && comm && comm->magic == HCCL_COMM_MAGIC && comm->async_error != hcclSuccess)
    return comm->async_msg;
  return hccl_last_error;
}

hcclResult_t hcclGetVersion(int *version) {
  if (!version) return hccl_err(hcclInvalidArgument, "hcclGetVersion: version is NULL");
  *version = HCCL_VERSION_CODE;
  return hcclSuccess;
}
