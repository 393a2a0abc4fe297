/* Group calls: operations between hcclGroupStart and hcclGroupEnd are
 * collected per thread and launched together at the outermost GroupEnd,
 * one launch per communicator, so matching sends and receives progress
 * together and one thread can drive several communicators (InitAll). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct group_item {
  hcclComm_t comm;
  hccl_op_t op;
  hcclStream_t stream;
} group_item_t;

static _Thread_local int group_depth;
static _Thread_local group_item_t *group_items;
static _Thread_local int group_n, group_cap;
static _Thread_local hcclResult_t group_error;

bool hccl_in_group(void) { return group_depth > 0; }

hcclResult_t hccl_group_add(hcclComm_t comm, const hccl_op_t *op, hcclStream_t stream) {
  if (group_n == group_cap) {
    int cap = group_cap ? group_cap * 2 : 16;
    group_item_t *n = realloc(group_items, sizeof *n * (size_t)cap);
    if (!n) return group_error = hccl_err(hcclSystemError, "out of memory");
    group_items = n;
    group_cap = cap;
  }
  group_items[group_n++] = (group_item_t){comm, *op, stream};
  return hcclSuccess;
}

hcclResult_t hcclGroupStart(void) {
  if (group_depth == 0) group_error = hcclSuccess;
  group_depth++;
  return hcclSuccess;
}

typedef struct launch_arg {
  hcclComm_t comm;
  hccl_op_t *ops;
  int nops;
  hcclStream_t stream;
  hcclResult_t r;
  char msg[512];
} launch_arg_t;

static void *launch_thread(void *p) {
  launch_arg_t *a = p;
  a->r = hccl_launch(a->comm, a->ops, a->nops, a->stream);
  if (a->r != hcclSuccess) strncpy(a->msg, hccl_thread_error(), sizeof a->msg - 1);
  return NULL;
}

hcclResult_t hcclGroupEnd(void) {
  if (group_depth <= 0) return hccl_err(hcclInvalidUsage, "hcclGroupEnd without hcclGroupStart");
  if (--group_depth > 0) return hcclSuccess;
  hccl_clear_error();
  int n = group_n;
  group_item_t *items = group_items;
  group_items = NULL;
  group_n = group_cap = 0;
  hcclResult_t r = group_error;
  if (r != hcclSuccess || n == 0) {
    free(items);
    return r;
  }
  /* Per communicator, in order of first appearance. */
  launch_arg_t *args = calloc((size_t)n, sizeof *args);
  hccl_op_t *ops = malloc(sizeof *ops * (size_t)n);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  bool *started = calloc((size_t)n, sizeof *started);
  if (!args || !ops || !th || !started) {
    free(args); free(ops); free(th); free(started); free(items);
    return hccl_err(hcclSystemError, "out of memory");
  }
  int ncomm = 0, k = 0;
  for (int i = 0; i < n; i++) {
    int c;
    for (c = 0; c < ncomm; c++)
      if (args[c].comm == items[i].comm) break;
    if (c < ncomm) continue;
    args[ncomm].comm = items[i].comm;
    args[ncomm].stream = items[i].stream;
    args[ncomm].ops = ops + k;
    for (int j = i; j < n; j++)
      if (items[j].comm == items[i].comm) ops[k++] = items[j].op;
    args[ncomm].nops = (int)(ops + k - args[ncomm].ops);
    ncomm++;
  }
  if (ncomm == 1) {
    r = hccl_launch(args[0].comm, args[0].ops, args[0].nops, args[0].stream);
  } else {
    /* Synchronous launches block until peers take part: one thread each. */
    for (int c = 0; c < ncomm; c++) {
      if (args[c].stream) {
        args[c].r = hccl_launch(args[c].comm, args[c].ops, args[c].nops, args[c].stream);
        if (args[c].r != hcclSuccess) strncpy(args[c].msg, hccl_thread_error(), sizeof args[c].msg - 1);
      } else {
        started[c] = pthread_create(&th[c], NULL, launch_thread, &args[c]) == 0;
        if (!started[c]) launch_thread(&args[c]);
      }
    }
    for (int c = 0; c < ncomm; c++)
      if (started[c]) pthread_join(th[c], NULL);
    for (int c = 0; c < ncomm; c++)
      if (args[c].r != hcclSuccess) {
        r = hccl_err(args[c].r, "%s", args[c].msg);
        break;
      }
  }
  free(args); free(ops); free(th); free(started); free(items);
  return r;
}
