/* How fused groups are cut into work (fusion_exec.c) and which reductions
 * may fuse at all (fusion_plan.c), in one place: the tile, its placement
 * on the stack, the blocks of rows a row op reads from cache, and the
 * elements per parallel task. The reason for each value is here; the
 * measurements behind them are in docs/PERFORMANCE.md ("Fused reductions
 * work in small blocks"). None of them changes a result: fused results are
 * bitwise those of the eager kernels whatever the tile and block sizes. */
#ifndef HPU_GRAPH_FUSION_TILING_H
#define HPU_GRAPH_FUSION_TILING_H

#include "kernels/iter.h"
#include "kernels/kernels.h"

/* Elements per tile: every member of a group (up to HPU_FUSION_MAX_GROUP)
 * keeps its own tile, and all of them with the scratch tiles (35 x 2 KB)
 * fit in L2 while each member reads the earlier ones. Not tuned by
 * measurement. */
#define HPU_FUSION_TILE 512

/* Floats from one tile to the next, and from a 4 KB boundary to the first
 * tile (1 KB): a tile at the same offset within a page as the page-aligned
 * operands the loop reads (the allocator's large blocks) makes every load
 * wait on a store (4K aliasing), which ran the fused loops at half speed
 * or less depending on where the stack happened to be. */
#define HPU_FUSION_PITCH (HPU_FUSION_TILE + 80)
#define HPU_FUSION_TILE_OFFSET 256

/* Elements of a row op's rows per block (softmax, log_softmax,
 * layer_norm): the block's copy of its input (64 KB in fp32) stays in L2
 * between the members writing it and the row op reading it. layer_norm
 * ran several times slower with REDUCE_BLOCK_ELEMS' size (27 ms instead of
 * 3.4 on [4096 x 768], Zen 5 class). */
#define HPU_FUSION_ROW_BLOCK_ELEMS 16384

/* A reduction's block is much smaller: its copy (4 KB in fp32) stays in
 * L1, and the reduce kernel costs little per call. For a fused
 * (a + b).sum(-1) or var(-1) over [4096 x 1024], 1024-element blocks were
 * the fastest tried (Zen 5 class, one thread, lazy step). */
#define HPU_FUSION_REDUCE_BLOCK_ELEMS 1024

/* Elements per parallel task, for groups and for blocks of rows: the
 * elementwise kernels' grain (runtime/schedule_policy.h), since a group
 * does what its members' eager kernels would. */
#define HPU_FUSION_GRAIN HPU_GRAIN

/* Reductions with rows this long or longer do not fuse: the reduce kernel
 * splits one output's reduction over threads, in a different summation
 * order, from this length on (when there are fewer outputs than threads),
 * and a block of rows must take the same path as the whole tensor. */
#define HPU_FUSION_REDUCE_MAX_LEN HPU_REDUCE_SPLIT_MIN_LEN

#endif
