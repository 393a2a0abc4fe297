/* Byte moves for the kernels' contiguous runs (rows of a strided copy,
 * gathered rows, row buffers). */
#ifndef HPU_KERNELS_BYTES_H
#define HPU_KERNELS_BYTES_H

#include <stddef.h>

/* memmove's contract (the ranges may overlap). */
void hpu_copy_bytes(void *dst, const void *src, size_t n);

#endif
