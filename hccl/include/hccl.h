/* HCCL: an NCCL-compatible collective library for habana_torch's CPU cards.
 *
 * Same functions, types, numbering and semantics as NCCL 2.19's nccl.h, with
 * the hccl prefix. Buffers may be device memory of our cards (csrc/
 * hpu_malloc) or plain host memory. The stream argument is a pointer to an
 * hpu_stream_t (csrc/include/hpu/stream.h): the collective is enqueued on
 * that card's in-order queue behind the work already queued and the call
 * returns at once. A NULL stream runs the collective synchronously on the
 * calling thread. Within a host ranks communicate through shared memory,
 * across hosts through TCP. */
#ifndef HCCL_H
#define HCCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCCL_MAJOR 2
#define HCCL_MINOR 19
#define HCCL_PATCH 0
#define HCCL_SUFFIX ""
#define HCCL_VERSION_CODE 21900
#define HCCL_VERSION(X, Y, Z) ((X) <= 2 && (Y) <= 8 ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#define HCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[HCCL_UNIQUE_ID_BYTES]; } hcclUniqueId;

typedef struct hcclComm *hcclComm_t;
#define HCCL_COMM_NULL NULL

/* A stream: pointer to an hpu_stream_t, or NULL (synchronous). */
struct hpu_stream;
typedef struct hpu_stream *hcclStream_t;

typedef enum {
  hcclSuccess = 0,
  hcclUnhandledCudaError = 1, /* a failure of the card runtime (csrc) */
  hcclSystemError = 2,
  hcclInternalError = 3,
  hcclInvalidArgument = 4,
  hcclInvalidUsage = 5,
  hcclRemoteError = 6, /* a peer died, timed out, aborted or misbehaved */
  hcclInProgress = 7,
  hcclNumResults = 8
} hcclResult_t;

#define HCCL_CONFIG_UNDEF_INT INT32_MIN
#define HCCL_CONFIG_UNDEF_PTR NULL
#define HCCL_SPLIT_NOCOLOR -1

/* Communicator configuration, as ncclConfig_t, plus timeoutMs (an hccl
 * extension: how long any wait of this communicator may last; <= 0 or undef
 * means HCCL_TIMEOUT seconds from the environment, default 1800 s). */
typedef struct hcclConfig_v21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
  int timeoutMs;
} hcclConfig_t;

#define HCCL_CONFIG_INITIALIZER {                                     \
  sizeof(hcclConfig_t), 0xcafebeef, HCCL_VERSION(HCCL_MAJOR, HCCL_MINOR, HCCL_PATCH), \
  HCCL_CONFIG_UNDEF_INT, HCCL_CONFIG_UNDEF_INT, HCCL_CONFIG_UNDEF_INT, \
  HCCL_CONFIG_UNDEF_INT, HCCL_CONFIG_UNDEF_PTR, HCCL_CONFIG_UNDEF_INT, \
  HCCL_CONFIG_UNDEF_INT }

typedef enum {
  hcclSum = 0,
  hcclProd = 1,
  hcclMax = 2,
  hcclMin = 3,
  hcclAvg = 4,
  hcclNumOps = 5,
  hcclMaxRedOp = 0x7fffffff
} hcclRedOp_t;

typedef enum {
  hcclInt8 = 0, hcclChar = 0,
  hcclUint8 = 1,
  hcclInt32 = 2, hcclInt = 2,
  hcclUint32 = 3,
  hcclInt64 = 4,
  hcclUint64 = 5,
  hcclFloat16 = 6, hcclHalf = 6,
  hcclFloat32 = 7, hcclFloat = 7,
  hcclFloat64 = 8, hcclDouble = 8,
  hcclBfloat16 = 9,
  hcclNumTypes = 10
} hcclDataType_t;

hcclResult_t hcclGetVersion(int *version);
hcclResult_t hcclGetUniqueId(hcclUniqueId *uniqueId);

hcclResult_t hcclCommInitRank(hcclComm_t *comm, int nranks, hcclUniqueId commId, int rank);
hcclResult_t hcclCommInitRankConfig(hcclComm_t *comm, int nranks, hcclUniqueId commId, int rank,
                                    hcclConfig_t *config);
/* One process, ndev ranks; devlist[i] is the card of rank i (NULL: 0..ndev-1).
 * Each rank's collectives must then be issued inside one group (or from one
 * thread per rank), as with NCCL. */
hcclResult_t hcclCommInitAll(hcclComm_t *comms, int ndev, const int *devlist);
/* Waits for every operation issued on comm to finish; returns the first
 * asynchronous error. */
hcclResult_t hcclCommFinalize(hcclComm_t comm);
hcclResult_t hcclCommDestroy(hcclComm_t comm);
/* Fails the communicator's pending and running operations on every rank
 * (its peers get hcclRemoteError) and frees it. Safe from another thread. */
hcclResult_t hcclCommAbort(hcclComm_t comm);
hcclResult_t hcclCommSplit(hcclComm_t comm, int color, int key, hcclComm_t *newcomm,
                           hcclConfig_t *config);
hcclResult_t hcclCommGetAsyncError(hcclComm_t comm, hcclResult_t *asyncError);
hcclResult_t hcclCommCount(const hcclComm_t comm, int *count);
hcclResult_t hcclCommCuDevice(const hcclComm_t comm, int *device);
hcclResult_t hcclCommUserRank(const hcclComm_t comm, int *rank);
/* hccl extension: change the timeout of every later wait (milliseconds). */
hcclResult_t hcclCommSetTimeout(hcclComm_t comm, int timeoutMs);

const char *hcclGetErrorString(hcclResult_t result);
/* Text of the last error seen by this thread (or comm's asynchronous error). */
const char *hcclGetLastError(hcclComm_t comm);

/* As ncclMemAlloc/ncclMemFree: page-aligned host memory suited to
 * collectives (any host or device buffer works as well). */
hcclResult_t hcclMemAlloc(void **ptr, size_t size);
hcclResult_t hcclMemFree(void *ptr);

hcclResult_t hcclReduce(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype,
                        hcclRedOp_t op, int root, hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclBcast(void *buff, size_t count, hcclDataType_t datatype, int root,
                       hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclBroadcast(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype,
                           int root, hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclAllReduce(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype,
                           hcclRedOp_t op, hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               hcclDataType_t datatype, hcclRedOp_t op, hcclComm_t comm,
                               hcclStream_t stream);
hcclResult_t hcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           hcclDataType_t datatype, hcclComm_t comm, hcclStream_t stream);
/* count elements go to each peer: sendbuff holds nranks blocks of count. */
hcclResult_t hcclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, hcclDataType_t datatype,
                          hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclSend(const void *sendbuff, size_t count, hcclDataType_t datatype, int peer,
                      hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclRecv(void *recvbuff, size_t count, hcclDataType_t datatype, int peer,
                      hcclComm_t comm, hcclStream_t stream);
hcclResult_t hcclBarrier(hcclComm_t comm, hcclStream_t stream);

hcclResult_t hcclGroupStart(void);
hcclResult_t hcclGroupEnd(void);

#ifdef __cplusplus
}
#endif
#endif
