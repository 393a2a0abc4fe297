/* Per-thread last-error message: errors are values; the text travels with
 * the thread that saw the failure. */
#include <stdarg.h>
#include <stdio.h>

#include "hpu/status.h"

static _Thread_local char last_error[1024];

const char *hpu_last_error(void) { return last_error; }

hpu_status_t hpu_error(hpu_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

const char *hpu_status_name(hpu_status_t status) {
  switch (status) {
    case HPU_SUCCESS: return "HPU_SUCCESS";
    case HPU_ERROR_INVALID_ARGUMENT: return "HPU_ERROR_INVALID_ARGUMENT";
    case HPU_ERROR_OUT_OF_MEMORY: return "HPU_ERROR_OUT_OF_MEMORY";
    case HPU_ERROR_UNSUPPORTED: return "HPU_ERROR_UNSUPPORTED";
    case HPU_ERROR_SYSTEM: return "HPU_ERROR_SYSTEM";
    case HPU_ERROR_FORKED: return "HPU_ERROR_FORKED";
    case HPU_ERROR_NOT_READY: return "HPU_ERROR_NOT_READY";
    case HPU_ERROR_INTERNAL: return "HPU_ERROR_INTERNAL";
    case HPU_ERROR_OUT_OF_RANGE: return "HPU_ERROR_OUT_OF_RANGE";
  }
  return "HPU_ERROR_UNKNOWN";
}
