/* Status codes and the per-thread error message of the C core. */
#ifndef HPU_STATUS_H
#define HPU_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hpu_status {
  HPU_SUCCESS = 0,
  HPU_ERROR_INVALID_ARGUMENT = 1, /* bad shapes, bad index, null pointer ... */
  HPU_ERROR_OUT_OF_MEMORY = 2,    /* the card's arena cannot satisfy a request */
  HPU_ERROR_UNSUPPORTED = 3,      /* a dtype or op the core does not implement */
  HPU_ERROR_SYSTEM = 4,           /* an OS call failed; the message has errno text */
  HPU_ERROR_FORKED = 5,           /* used in a child forked after initialisation */
  HPU_ERROR_NOT_READY = 6,        /* query: queued work has not finished yet */
  HPU_ERROR_INTERNAL = 7,         /* a bug in the core */
  HPU_ERROR_OUT_OF_RANGE = 8,     /* an index value out of range (found by a kernel: IndexError) */
} hpu_status_t;

/* Message of the last failing call made on this thread ("" if none).
 * Errors found by a stream worker are reported by the next synchronize /
 * query on that stream, with the worker's message copied to the caller. */
const char *hpu_last_error(void);

/* Short constant name of a status, e.g. "HPU_ERROR_OUT_OF_MEMORY". */
const char *hpu_status_name(hpu_status_t status);

/* Set this thread's message and return `status` (for `return hpu_error(...)`). */
hpu_status_t hpu_error(hpu_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
