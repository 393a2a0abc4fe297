/* Device trace events for executed nodes (hpu/trace.h): which engine ran
 * them, a name, the bytes they touched and, for matmuls, the flops. Only
 * called while a profiler records. */
#include "graph/trace_nodes.h"

#include <stdio.h>
#include <string.h>

#include "hpu/memory.h"
#include "runtime/runtime.h"

static uint64_t operand_bytes(const hpu_tensor_t *t) {
  return (uint64_t)hpu_tensor_numel(t) * hpu_dtype_size(t->dtype);
}

static uint64_t node_bytes(const hpu_node_t *n) {
  uint64_t b = 0;
  for (int k = 0; k < n->num_inputs; k++) b += operand_bytes(&n->inputs[k]);
  for (int k = 0; k < n->num_outputs; k++) b += operand_bytes(&n->outputs[k]);
  return b;
}

/* out[.., m, n] from in0[.., m, k]: a multiply and an add per term. */
static uint64_t matmul_flops(const hpu_node_t *n) {
  const hpu_tensor_t *a = &n->inputs[0];
  if (a->ndim < 2) return 0;
  return 2 * (uint64_t)hpu_tensor_numel(&n->outputs[0]) * (uint64_t)a->sizes[a->ndim - 1];
}

static int on_card(const hpu_tensor_t *t) {
  int device = -1;
  return hpu_pointer_get_device(t->storage, &device) == HPU_SUCCESS && device >= 0;
}

static void name_copy(const hpu_node_t *n, char *name, size_t len) {
  int from = on_card(&n->inputs[0]), to = on_card(&n->outputs[0]);
  snprintf(name, len, "memcpy %sto%s", from ? "D" : "H", to ? "D" : "H");
}

static void record(const hpu_node_t *n, int engine, const char *name, uint64_t bytes, uint64_t flops,
                   uint64_t t0, uint64_t t1) {
  hpu_trace_event_t ev = {.start_ns = t0, .end_ns = t1, .bytes = bytes, .flops = flops,
                          .correlation = n->correlation, .device = hpu_queue_current_device(),
                          .engine = engine};
  snprintf(ev.name, sizeof ev.name, "%s", name);
  hpu_trace_record(&ev);
}

void hpu_trace_node(const hpu_node_t *n, uint64_t t0, uint64_t t1) {
  char name[HPU_TRACE_NAME_LEN];
  if (n->op == HPU_OP_COPY) {
    name_copy(n, name, sizeof name);
    record(n, HPU_ENGINE_DMA, name, node_bytes(n), 0, t0, t1);
  } else if (n->op == HPU_OP_MATMUL) {
    record(n, HPU_ENGINE_MME, hpu_op_name(n->op), node_bytes(n), matmul_flops(n), t0, t1);
  } else {
    record(n, HPU_ENGINE_TPC, hpu_op_name(n->op), node_bytes(n), 0, t0, t1);
  }
}

/* One TPC event for the group, named by its members ("fused add+mul+relu",
 * cut short when long) and linked to the first member's host op. */
void hpu_trace_fused(const hpu_node_t *nodes, int count, uint64_t t0, uint64_t t1) {
  char name[HPU_TRACE_NAME_LEN];
  size_t len = (size_t)snprintf(name, sizeof name, "fused ");
  uint64_t bytes = 0;
  for (int i = 0; i < count; i++) {
    bytes += node_bytes(&nodes[i]);
    if (len < sizeof name)
      len += (size_t)snprintf(name + len, sizeof name - len, "%s%s", i ? "+" : "", hpu_op_name(nodes[i].op));
  }
  if (len >= sizeof name) memcpy(name + sizeof name - 4, "...", 4);
  record(&nodes[0], HPU_ENGINE_TPC, name, bytes, 0, t0, t1);
}
