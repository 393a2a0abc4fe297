/* Counter-based RNG (Philox4x32-10), as CUDA's: a generator is a seed and
 * an offset. Results depend only on the generator state and the element
 * index: reproducible under manual_seed, independent of the thread split.
 *
 * The random stream of an op with params.rng = (seed, offset): word j
 * (j = 0, 1, 2, ...) is output word (j % 4) of Philox4x32-10 with
 * key = (lo32(seed), hi32(seed)) and 128-bit counter
 * (lo32(offset + j/4), hi32(offset + j/4), 0, 0).
 * Element i (row-major index in the output) uses words i*w .. i*w+w-1 where
 * w = hpu_rng_words_per_element(op, dtype):
 *   UNIFORM: 1 (2 for float64)   u = 24 (53) top bits / 2^24 (2^53), in [0,1)
 *   NORMAL: 2 (4 for float64)    Box-Muller on two uniforms, cos branch
 *   BERNOULLI: 1                 out = (u < p)
 *   RANDOM: 2                    64-bit word pair (lo, hi) modulo (b - a)
 * After an op the generator's offset has advanced by ceil(numel * w / 4). */
#ifndef HPU_RNG_H
#define HPU_RNG_H

#include <stdint.h>
#include "hpu/op.h"
#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpu_generator hpu_generator_t;

/* The per-card default generator (created with seed 67280421310721, as
 * PyTorch's default). */
hpu_status_t hpu_generator_default(int device, hpu_generator_t **gen);
hpu_status_t hpu_generator_create(uint64_t seed, hpu_generator_t **gen);
void hpu_generator_destroy(hpu_generator_t *gen);

/* Setting the seed resets the offset to 0. All calls are thread-safe. */
void hpu_generator_set_seed(hpu_generator_t *gen, uint64_t seed);
uint64_t hpu_generator_get_seed(const hpu_generator_t *gen);
void hpu_generator_set_offset(hpu_generator_t *gen, uint64_t offset);
uint64_t hpu_generator_get_offset(const hpu_generator_t *gen);

/* For an HPU_OP_RNG_* node with its outputs filled in: writes the current
 * seed/offset into node->params.rng and advances the generator by what the
 * node will consume. */
hpu_status_t hpu_generator_prepare(hpu_generator_t *gen, hpu_node_t *node);

int hpu_rng_words_per_element(hpu_op_t op, hpu_dtype_t dtype);

/* One Philox4x32-10 block: out[0..3] for (key, counter). */
void hpu_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);

#ifdef __cplusplus
}
#endif
#endif
