/* Dumps of compiled lazy-mode graphs: a text file a person can read (nodes,
 * buffers, fusion groups, what stays in cache) and Graphviz DOT. */
#include "graph/dump.h"

#include <stdio.h>
#include <string.h>

/* Buffers are named by first appearance so dumps of two runs compare. */
typedef struct {
  const void *addr[4096];
  int n;
} names_t;

static int buffer_id(names_t *nm, const hpu_tensor_t *t) {
  const void *a = hpu_tensor_data(t);
  for (int i = 0; i < nm->n; i++)
    if (nm->addr[i] == a) return i;
  if (nm->n < 4096) nm->addr[nm->n] = a;
  return nm->n < 4096 ? nm->n++ : -1;
}

static void tensor_text(char *buf, size_t len, const hpu_tensor_t *t) {
  size_t used = (size_t)snprintf(buf, len, "%s[", hpu_dtype_name(t->dtype));
  for (int d = 0; d < t->ndim && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, d ? ",%lld" : "%lld", (long long)t->sizes[d]);
  if (used < len)
    snprintf(buf + used, len - used, "]%s", hpu_tensor_is_contiguous(t) ? "" : " strided");
}

static int producer(const hpu_node_t *nodes, int i, const hpu_tensor_t *in) {
  for (int j = i - 1; j >= 0; j--)
    for (int o = 0; o < nodes[j].num_outputs; o++)
      if (hpu_tensor_data(&nodes[j].outputs[o]) == hpu_tensor_data(in)) return j;
  return -1;
}

static int group_of(const hpu_plan_t *plan, int i) {
  return plan && i < plan->num_nodes ? plan->group_of[i] : -1;
}

static int write_text(const char *path, int device, const hpu_node_t *nodes, int n,
                      const hpu_plan_t *plan, const uint8_t *dead, uint64_t hash) {
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  names_t nm = {.n = 0};
  fprintf(f, "graph on hpu:%d, signature %016llx: %d nodes, %d fused groups (%d nodes), "
             "%d intermediate stores dropped\n\n",
          device, (unsigned long long)hash, n, plan ? plan->num_groups : 0,
          plan ? plan->fused_nodes : 0, plan ? plan->dropped_stores : 0);
  fprintf(f, "nodes (buffers bN are named by first use; <- nK: produced by node K):\n");
  for (int i = 0; i < n; i++) {
    const hpu_node_t *nd = &nodes[i];
    char t[256];
    int g = group_of(plan, i);
    fprintf(f, "  n%-4d %-14s", i, hpu_op_name(nd->op));
    if (g >= 0) fprintf(f, " [g%d]", g);
    for (int o = 0; o < nd->num_outputs; o++) {
      tensor_text(t, sizeof t, &nd->outputs[o]);
      fprintf(f, "  out b%d %s%s", buffer_id(&nm, &nd->outputs[o]), t,
              dead && dead[i] ? " (dead after graph)" : "");
    }
    for (int k = 0; k < nd->num_inputs; k++) {
      tensor_text(t, sizeof t, &nd->inputs[k]);
      int p = producer(nodes, i, &nd->inputs[k]);
      fprintf(f, "  in b%d %s", buffer_id(&nm, &nd->inputs[k]), t);
      if (p >= 0) fprintf(f, " <- n%d", p);
    }
    fprintf(f, "\n");
  }
  if (plan && plan->num_groups) {
    fprintf(f, "\nfusion groups (one pass over memory in 512-element tiles):\n");
    for (int gi = 0; gi < plan->num_groups; gi++) {
      const hpu_fused_group_t *g = &plan->groups[gi];
      fprintf(f, "  g%d: nodes n%d..n%d, %lld elements; written to memory:", gi, g->first,
              g->first + g->count - 1, (long long)g->numel);
      for (int m = 0; m < g->count; m++)
        if (g->store[m]) fprintf(f, " n%d", g->first + m);
      fprintf(f, "; kept in cache only:");
      int any = 0;
      for (int m = 0; m < g->count; m++)
        if (!g->store[m]) fprintf(f, " n%d", g->first + m), any = 1;
      fprintf(f, "%s", any ? "" : " none");
      if (g->rows_node >= 0) {
        const hpu_node_t *rn = &nodes[g->rows_node];
        static const char *const kinds[] = {[HPU_REDUCE_SUM] = "sum", [HPU_REDUCE_MEAN] = "mean",
                                            [HPU_REDUCE_VAR] = "var", [HPU_REDUCE_STD] = "std"};
        int64_t kind = rn->params.nn.i[0];
        const char *what = hpu_op_name(rn->op);
        if (rn->op == HPU_OP_REDUCE && kind >= 0 && kind <= HPU_REDUCE_STD && kinds[kind])
          what = kinds[kind];
        fprintf(f, "; then n%d (%s) on each block of rows of %lld as n%d produces it",
                g->rows_node, what, (long long)g->row_len, g->first + g->feeder);
      }
      int bc = 0;
      for (int m = 0; m < g->count; m++) {
        const hpu_node_t *nd = &nodes[g->first + m];
        for (int k = 0; k < nd->num_inputs; k++) {
          int64_t in = hpu_tensor_numel(&nd->inputs[k]);
          if (in != 1 && in != g->numel) fprintf(f, "%s n%d.in%d", bc++ ? "," : "; broadcast:", g->first + m, k);
        }
      }
      fprintf(f, "\n");
    }
  }
  fprintf(f, "\nbuffers:\n");
  for (int b = 0; b < nm.n; b++) fprintf(f, "  b%d at %p\n", b, nm.addr[b]);
  fclose(f);
  return 1;
}

static int write_dot(const char *path, const hpu_node_t *nodes, int n, const hpu_plan_t *plan) {
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  fprintf(f, "digraph hpu_graph {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
  int gcur = -1;
  for (int i = 0; i < n; i++) {
    int g = group_of(plan, i);
    if (g != gcur) {
      if (gcur >= 0) fprintf(f, "  }\n");
      if (g >= 0)
        fprintf(f, "  subgraph cluster_g%d {\n    label=\"fused g%d\"; style=dashed;\n", g, g);
      gcur = g;
    }
    char t[256];
    tensor_text(t, sizeof t, &nodes[i].outputs[0]);
    fprintf(f, "  %sn%d [label=\"n%d %s\\n%s\"];\n", g >= 0 ? "  " : "", i, i,
            hpu_op_name(nodes[i].op), t);
  }
  if (gcur >= 0) fprintf(f, "  }\n");
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < nodes[i].num_inputs; k++) {
      int p = producer(nodes, i, &nodes[i].inputs[k]);
      if (p >= 0) {
        fprintf(f, "  n%d -> n%d;\n", p, i);
      } else {
        fprintf(f, "  in_%d_%d [shape=ellipse, label=\"input\"];\n  in_%d_%d -> n%d;\n", i, k, i, k, i);
      }
    }
  }
  fprintf(f, "}\n");
  fclose(f);
  return 1;
}

int hpu_graph_dump(const char *prefix, int device, const hpu_node_t *nodes, int n,
                   const hpu_plan_t *plan, const uint8_t *dead, uint64_t hash) {
  char path[1024];
  snprintf(path, sizeof path, "%s.txt", prefix);
  int ok = write_text(path, device, nodes, n, plan, dead, hash);
  snprintf(path, sizeof path, "%s.dot", prefix);
  return ok && write_dot(path, nodes, n, plan);
}
