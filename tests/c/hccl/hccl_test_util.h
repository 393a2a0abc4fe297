/* Shared helpers of the HCCL tests: rank discovery (mpirun or environment),
 * communicator creation, and data that has an exact expected result in any
 * reduction order (nccl-tests' idea: small integers). */
#ifndef HCCL_TEST_UTIL_H
#define HCCL_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl.h"
#include "hpu/dtype.h"

static const hcclDataType_t ht_all_types[] = {hcclInt8, hcclUint8, hcclInt32, hcclUint32, hcclInt64,
                                               hcclUint64, hcclFloat16, hcclFloat32, hcclFloat64, hcclBfloat16};
#define HT_NTYPES 10
static const hcclRedOp_t ht_all_ops[] = {hcclSum, hcclProd, hcclMax, hcclMin, hcclAvg};
#define HT_NOPS 5

static inline size_t ht_size(hcclDataType_t dt) {
  switch (dt) {
    case hcclInt8: case hcclUint8: return 1;
    case hcclFloat16: case hcclBfloat16: return 2;
    case hcclInt32: case hcclUint32: case hcclFloat32: return 4;
    default: return 8;
  }
}

static inline const char *ht_type_name(hcclDataType_t dt) {
  static const char *n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
  return (int)dt >= 0 && dt < hcclNumTypes ? n[dt] : "?";
}
static inline const char *ht_op_name(hcclRedOp_t op) {
  static const char *n[] = {"sum", "prod", "max", "min", "avg"};
  return (int)op >= 0 && op < hcclNumOps ? n[op] : "?";
}

static inline float ht_bf16_to_f(uint16_t v) { uint32_t b = (uint32_t)v << 16; float f; memcpy(&f, &b, 4); return f; }
static inline uint16_t ht_f_to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

/* Store an integer-valued number exactly (ints wrap as two's complement). */
static inline void ht_store(void *buf, hcclDataType_t dt, size_t i, int64_t v) {
  switch (dt) {
    case hcclInt8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)v; break;
    case hcclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case hcclInt32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)v; break;
    case hcclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case hcclInt64: ((int64_t *)buf)[i] = v; break;
    case hcclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case hcclFloat16: ((uint16_t *)buf)[i] = hpu_float_to_half((float)v); break;
    case hcclBfloat16: ((uint16_t *)buf)[i] = ht_f_to_bf16((float)v); break;
    case hcclFloat32: ((float *)buf)[i] = (float)v; break;
    case hcclFloat64: ((double *)buf)[i] = (double)v; break;
    default: break;
  }
}

/* The exact sum divided by n the way hcclAvg does it (in the element type,
 * through float for the 16-bit types). */
static inline void ht_store_avg(void *buf, hcclDataType_t dt, size_t i, int64_t sum, int n) {
  switch (dt) {
    case hcclFloat16: ((uint16_t *)buf)[i] = hpu_float_to_half((float)sum / (float)n); break;
    case hcclBfloat16: ((uint16_t *)buf)[i] = ht_f_to_bf16((float)sum / (float)n); break;
    case hcclFloat32: ((float *)buf)[i] = (float)sum / (float)n; break;
    case hcclFloat64: ((double *)buf)[i] = (double)sum / (double)n; break;
    case hcclInt8: ((int8_t *)buf)[i] = (int8_t)((int8_t)sum / n); break;
    case hcclUint8: ((uint8_t *)buf)[i] = (uint8_t)((uint8_t)sum / n); break;
    case hcclInt32: ((int32_t *)buf)[i] = (int32_t)((int32_t)sum / n); break;
    case hcclUint32: ((uint32_t *)buf)[i] = (uint32_t)((uint32_t)sum / (uint32_t)n); break;
    case hcclInt64: ((int64_t *)buf)[i] = sum / n; break;
    case hcclUint64: ((uint64_t *)buf)[i] = (uint64_t)sum / (uint64_t)n; break;
    default: break;
  }
}

/* Input of rank r at index i for a reduction op: small values whose sum,
 * product, max, min are exact in every type (products of 1s and 2s, at most
 * 2^nranks; integers wrap identically in the library and here). */
static inline int64_t ht_input(hcclRedOp_t op, int r, size_t i, hcclDataType_t dt) {
  int is_signed = dt == hcclInt8 || dt == hcclInt32 || dt == hcclInt64 || dt == hcclFloat16 || dt == hcclFloat32 ||
                  dt == hcclFloat64 || dt == hcclBfloat16;
  switch (op) {
    case hcclProd: return ((size_t)r + i) % 3 == 0 ? 2 : 1;
    case hcclMax: case hcclMin: return (int64_t)(((size_t)r * 7 + i * 3) % 17) - (is_signed ? 8 : 0);
    default: return (int64_t)(((size_t)r + i * 13) % 5);
  }
}

static inline int64_t ht_expected_raw(hcclRedOp_t op, int nranks, size_t i, hcclDataType_t dt) {
  int64_t acc = ht_input(op, 0, i, dt);
  for (int r = 1; r < nranks; r++) {
    int64_t v = ht_input(op, r, i, dt);
    switch (op) {
      case hcclProd: acc = (int64_t)((uint64_t)acc * (uint64_t)v); break;
      case hcclMax: acc = v > acc ? v : acc; break;
      case hcclMin: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  return acc;
}

static inline void ht_fill(void *buf, hcclDataType_t dt, hcclRedOp_t op, int rank, size_t count, size_t base) {
  for (size_t i = 0; i < count; i++) ht_store(buf, dt, i, ht_input(op, rank, base + i, dt));
}

static inline void ht_expected(void *buf, hcclDataType_t dt, hcclRedOp_t op, int nranks, size_t count, size_t base) {
  for (size_t i = 0; i < count; i++) {
    int64_t v = ht_expected_raw(op, nranks, base + i, dt);
    if (op == hcclAvg) ht_store_avg(buf, dt, i, v, nranks);
    else ht_store(buf, dt, i, v);
  }
}

/* Number of elements that differ bytewise. */
static inline size_t ht_count_wrong(const void *got, const void *want, hcclDataType_t dt, size_t count) {
  size_t es = ht_size(dt), bad = 0;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) bad++;
  return bad;
}

static inline int ht_shm_clean(void) {
  /* Our segments are /dev/shm/hccl-*. */
  FILE *p = popen("ls /dev/shm 2>/dev/null | grep -c '^hccl-'", "r");
  int n = 0;
  if (p) {
    if (fscanf(p, "%d", &n) != 1) n = 0;
    pclose(p);
  }
  return n == 0;
}

#endif
