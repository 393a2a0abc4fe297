#include "graph/ptrmap.h"

#include <stdlib.h>

#include "runtime/hash.h"

static uint32_t slot_of(const hpu_ptrmap_t *m, const void *p) {
  return hpu_hash_ptr(p, 0) & m->mask;
}

int hpu_ptrmap_init(hpu_ptrmap_t *m, int32_t ids, int32_t pushes) {
  uint32_t size = 16;
  while (size < 2u * (uint32_t)(pushes > 0 ? pushes : 1)) size <<= 1;
  m->mask = size - 1;
  m->items = ids;
  m->keys = calloc(size, sizeof *m->keys);
  m->heads = malloc(size * sizeof *m->heads);
  m->next = malloc((size_t)(ids > 0 ? ids : 1) * sizeof *m->next);
  if (!m->keys || !m->heads || !m->next) {
    hpu_ptrmap_free(m);
    return 0;
  }
  return 1;
}

int hpu_ptrmap_init_outputs(hpu_ptrmap_t *m, const hpu_node_t *nodes, int n) {
  int32_t outputs = 0;
  for (int i = 0; i < n; i++) outputs += nodes[i].num_outputs;
  return hpu_ptrmap_init(m, n * 8, outputs);
}

void hpu_ptrmap_free(hpu_ptrmap_t *m) {
  free(m->keys);
  free(m->heads);
  free(m->next);
  m->keys = NULL;
  m->heads = m->next = NULL;
}

void hpu_ptrmap_push(hpu_ptrmap_t *m, const void *p, int32_t id) {
  uint32_t s = slot_of(m, p);
  while (m->keys[s] && m->keys[s] != p) s = (s + 1) & m->mask;
  if (!m->keys[s]) {
    m->keys[s] = p;
    m->next[id] = -1;
  } else {
    m->next[id] = m->heads[s];
  }
  m->heads[s] = id;
}

int32_t hpu_ptrmap_head(const hpu_ptrmap_t *m, const void *p) {
  uint32_t s = slot_of(m, p);
  while (m->keys[s]) {
    if (m->keys[s] == p) return m->heads[s];
    s = (s + 1) & m->mask;
  }
  return -1;
}
