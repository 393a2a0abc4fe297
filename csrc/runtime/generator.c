/* Philox generators: a seed and an offset under a mutex. The kernels read
 * (seed, offset) from the node, so a generator only hands out disjoint
 * counter ranges; results do not depend on threads or timing. */
#include <pthread.h>
#include <stdlib.h>

#include "hpu/status.h"
#include "hpu/rng.h"
#include "runtime/runtime.h"
#include "runtime/lock.h"

#define DEFAULT_SEED 67280421310721ULL

struct hpu_generator {
  hpu_mutex_t mu;
  uint64_t seed, offset;
  int is_default; /* owned by the runtime: destroy is a no-op */
};

static hpu_generator_t *defaults[HPU_MAX_CARDS];
static hpu_mutex_t defaults_mu = HPU_MUTEX_INIT(HPU_RANK_LEAF, "default generators");

static hpu_generator_t *gen_new(uint64_t seed, int is_default) {
  hpu_generator_t *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  hpu_mutex_init(&g->mu, HPU_RANK_LEAF, "generator");
  g->seed = seed;
  g->is_default = is_default;
  return g;
}

hpu_status_t hpu_generator_default(int device, hpu_generator_t **gen) {
  if (!gen) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_generator_default: gen is NULL");
  hpu_status_t st = hpu_rt_enter_device(device);
  if (st != HPU_SUCCESS) return st;
  hpu_mutex_lock(&defaults_mu);
  if (!defaults[device]) defaults[device] = gen_new(DEFAULT_SEED, 1);
  *gen = defaults[device];
  hpu_mutex_unlock(&defaults_mu);
  if (!*gen) return hpu_error(HPU_ERROR_SYSTEM, "hpu_generator_default: out of host memory");
  return HPU_SUCCESS;
}

hpu_status_t hpu_generator_create(uint64_t seed, hpu_generator_t **gen) {
  if (!gen) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_generator_create: gen is NULL");
  *gen = gen_new(seed, 0);
  if (!*gen) return hpu_error(HPU_ERROR_SYSTEM, "hpu_generator_create: out of host memory");
  return HPU_SUCCESS;
}

void hpu_generator_destroy(hpu_generator_t *gen) {
  if (!gen || gen->is_default) return;
  pthread_mutex_destroy(&gen->mu.mu);
  free(gen);
}

void hpu_generator_set_seed(hpu_generator_t *gen, uint64_t seed) {
  if (!gen) return;
  hpu_mutex_lock(&gen->mu);
  gen->seed = seed;
  gen->offset = 0;
  hpu_mutex_unlock(&gen->mu);
}

uint64_t hpu_generator_get_seed(const hpu_generator_t *gen) {
  if (!gen) return 0;
  hpu_generator_t *g = (hpu_generator_t *)gen; /* the lock is not part of the value */
  hpu_mutex_lock(&g->mu);
  uint64_t v = g->seed;
  hpu_mutex_unlock(&g->mu);
  return v;
}

void hpu_generator_set_offset(hpu_generator_t *gen, uint64_t offset) {
  if (!gen) return;
  hpu_mutex_lock(&gen->mu);
  gen->offset = offset;
  hpu_mutex_unlock(&gen->mu);
}

uint64_t hpu_generator_get_offset(const hpu_generator_t *gen) {
  if (!gen) return 0;
  hpu_generator_t *g = (hpu_generator_t *)gen;
  hpu_mutex_lock(&g->mu);
  uint64_t v = g->offset;
  hpu_mutex_unlock(&g->mu);
  return v;
}

hpu_status_t hpu_generator_prepare(hpu_generator_t *gen, hpu_node_t *node) {
  if (!gen || !node)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_generator_prepare: NULL argument");
  if (node->num_outputs < 1)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_generator_prepare: the node has no output");
  const hpu_tensor_t *out = &node->outputs[0];
  int w = hpu_rng_words_per_element(node->op, out->dtype); /* csrc/kernels/rng.c */
  if (w <= 0)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu_generator_prepare: op %d is not a random op (HPU_OP_RNG_*)",
                     (int)node->op);
  if (out->ndim < 0 || out->ndim > HPU_MAX_DIMS)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_generator_prepare: bad output ndim %d",
                     out->ndim);
  uint64_t numel = 1;
  for (int d = 0; d < out->ndim; d++) {
    if (out->sizes[d] < 0)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                       "hpu_generator_prepare: negative output size %lld",
                       (long long)out->sizes[d]);
    numel *= (uint64_t)out->sizes[d];
  }
  uint64_t advance = (numel * (uint64_t)w + 3) / 4;
  hpu_mutex_lock(&gen->mu);
  node->params.rng.seed = gen->seed;
  node->params.rng.offset = gen->offset;
  gen->offset += advance;
  hpu_mutex_unlock(&gen->mu);
  return HPU_SUCCESS;
}
