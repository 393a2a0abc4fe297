/* The C core's hash functions, one per kind of key.
 *
 * Each is what its users had before they shared it, bit for bit: the
 * recipe files on disk carry FNV-1a checksums, so changing that one would
 * reject every cached recipe. HCCL uses the FNV-1a one too. */
#ifndef HPU_RUNTIME_HASH_H
#define HPU_RUNTIME_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Fibonacci hashing's multiplier (2^64 / the golden ratio): spreads keys
 * that differ only in a few bits (aligned pointers, small integers) over
 * the high bits of the product. */
#define HPU_HASH_GOLDEN 0x9E3779B97F4A7C15ull

/* A pointer's 32-bit hash (take the low bits for a power-of-two table).
 * `align_bits` low bits of the pointer are dropped first: the allocator's
 * blocks are 512-byte aligned, so theirs carry no information. */
static inline uint32_t hpu_hash_ptr(const void *p, unsigned align_bits) {
  return (uint32_t)((((uint64_t)(uintptr_t)p >> align_bits) * HPU_HASH_GOLDEN) >> 32);
}

/* A sequence of 64-bit words, a word at a time (graph signatures: hashed
 * on every flush, where a byte-wise hash cost more than recording). */
static inline uint64_t hpu_hash_words(const int64_t *w, size_t n) {
  uint64_t h = 0x243F6A8885A308D3ull;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ (uint64_t)w[i]) * HPU_HASH_GOLDEN;
    h ^= h >> 29;
  }
  return h;
}

/* FNV-1a over bytes, continuing from `h`. Two starting values: the
 * recipe files' checksums start from HPU_FNV1A_SEED, which is not FNV's
 * offset basis (a digit short of it) but is a format on disk now; HCCL's
 * host and job ids start from the standard basis, HPU_FNV1A_BASIS, and
 * every rank of a job must compute them alike. */
#define HPU_FNV1A_SEED 1469598103934665603ull
#define HPU_FNV1A_BASIS 0xcbf29ce484222325ull
static inline uint64_t hpu_fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *b = data;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#endif
