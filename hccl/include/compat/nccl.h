/* nccl.h compatibility: a program written for NCCL compiles unchanged
 * against HCCL (add hccl/include/compat to the include path, link hccl).
 * cudaStream_t becomes an hcclStream_t (NULL or a pointer to hpu_stream_t)
 * unless a CUDA runtime header already defined it. */
#ifndef NCCL_H_
#define NCCL_H_

#include "hccl.h"

#define NCCL_MAJOR HCCL_MAJOR
#define NCCL_MINOR HCCL_MINOR
#define NCCL_PATCH HCCL_PATCH
#define NCCL_SUFFIX HCCL_SUFFIX
#define NCCL_VERSION_CODE HCCL_VERSION_CODE
#define NCCL_VERSION(X, Y, Z) HCCL_VERSION(X, Y, Z)
#define NCCL_UNIQUE_ID_BYTES HCCL_UNIQUE_ID_BYTES
#define NCCL_COMM_NULL HCCL_COMM_NULL
#define NCCL_CONFIG_UNDEF_INT HCCL_CONFIG_UNDEF_INT
#define NCCL_CONFIG_UNDEF_PTR HCCL_CONFIG_UNDEF_PTR
#define NCCL_SPLIT_NOCOLOR HCCL_SPLIT_NOCOLOR
#define NCCL_CONFIG_INITIALIZER HCCL_CONFIG_INITIALIZER

#if !defined(__CUDA_RUNTIME_H__) && !defined(HCCL_NO_CUDA_STREAM_TYPEDEF)
typedef hcclStream_t cudaStream_t;
#endif

typedef hcclUniqueId ncclUniqueId;
typedef hcclComm_t ncclComm_t;
typedef hcclConfig_t ncclConfig_t;
typedef hcclResult_t ncclResult_t;
typedef hcclRedOp_t ncclRedOp_t;
typedef hcclDataType_t ncclDataType_t;

#define ncclSuccess hcclSuccess
#define ncclUnhandledCudaError hcclUnhandledCudaError
#define ncclSystemError hcclSystemError
#define ncclInternalError hcclInternalError
#define ncclInvalidArgument hcclInvalidArgument
#define ncclInvalidUsage hcclInvalidUsage
#define ncclRemoteError hcclRemoteError
#define ncclInProgress hcclInProgress
#define ncclNumResults hcclNumResults

#define ncclSum hcclSum
#define ncclProd hcclProd
#define ncclMax hcclMax
#define ncclMin hcclMin
#define ncclAvg hcclAvg
#define ncclNumOps hcclNumOps
#define ncclMaxRedOp hcclMaxRedOp

#define ncclInt8 hcclInt8
#define ncclChar hcclChar
#define ncclUint8 hcclUint8
#define ncclInt32 hcclInt32
#define ncclInt hcclInt
#define ncclUint32 hcclUint32
#define ncclInt64 hcclInt64
#define ncclUint64 hcclUint64
#define ncclFloat16 hcclFloat16
#define ncclHalf hcclHalf
#define ncclFloat32 hcclFloat32
#define ncclFloat hcclFloat
#define ncclFloat64 hcclFloat64
#define ncclDouble hcclDouble
#define ncclBfloat16 hcclBfloat16
#define ncclNumTypes hcclNumTypes

#define ncclGetVersion hcclGetVersion
#define ncclGetUniqueId hcclGetUniqueId
#define ncclCommInitRank hcclCommInitRank
#define ncclCommInitRankConfig hcclCommInitRankConfig
#define ncclCommInitAll hcclCommInitAll
#define ncclCommFinalize hcclCommFinalize
#define ncclCommDestroy hcclCommDestroy
#define ncclCommAbort hcclCommAbort
#define ncclCommSplit hcclCommSplit
#define ncclCommGetAsyncError hcclCommGetAsyncError
#define ncclCommCount hcclCommCount
#define ncclCommCuDevice hcclCommCuDevice
#define ncclCommUserRank hcclCommUserRank
#define ncclGetErrorString hcclGetErrorString
#define ncclGetLastError hcclGetLastError
#define ncclMemAlloc hcclMemAlloc
#define ncclMemFree hcclMemFree
#define ncclReduce hcclReduce
#define ncclBcast hcclBcast
#define ncclBroadcast hcclBroadcast
#define ncclAllReduce hcclAllReduce
#define ncclReduceScatter hcclReduceScatter
#define ncclAllGather hcclAllGather
#define ncclAlltoAll hcclAlltoAll
#define ncclSend hcclSend
#define ncclRecv hcclRecv
#define ncclGroupStart hcclGroupStart
#define ncclGroupEnd hcclGroupEnd

#endif
