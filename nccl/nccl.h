/* nccl.h -- weft's own header for the NCCL API: the names, values and struct layouts of NCCL's
 * public C API (release 2.30), so that programs written for NCCL build against weft's
 * libnccl.so.2 (nccl/BUILD) and programs built against NCCL's header load it unchanged.
 *
 * Written for weft from the published API facts; tests/nccl/abi_test compiles one probe against
 * this file and against NVIDIA's header and compares every size, offset and constant both have.
 * What each call does under weft (implemented, a no-op, refused) is in docs/gpus.md,
 * "What each NCCL call does".
 */
#ifndef WEFT_NCCL_H_
#define WEFT_NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* CUDA's own definition, so that this header needs no CUDA toolkit; skipped where
 * cuda_runtime.h (driver_types.h) came first, and identical to it where it comes later (C11 and
 * C++ allow the repetition). */
#ifndef __DRIVER_TYPES_H__
typedef struct CUstream_st *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The NCCL release whose API this header describes (and libnccl.so.2 reports). */
#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""
/* Releases up to 2.8 were coded 1000 * major + 100 * minor + patch, later ones 10000 * major. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE 23007

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
/* The magic of ncclConfig_t (and of every versioned argument struct but ncclSimInfo_t). */
#define NCCL_API_MAGIC 0xcafebeef

/* Window flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink's shrinkFlags */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke's revokeFlags */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclCommSuspend's flags */
#define NCCL_SUSPEND_MEM 0x01

/* Communicator options. The struct grows by release: size, magic and version come first and say
 * how much of it the caller has (80 bytes in 2.28, 88 in 2.29, 96 in 2.30), and weft reads no
 * field past `size`. Fill it from NCCL_CONFIG_INITIALIZER, then set what you need. */
typedef struct ncclConfig_v23000 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking; /* 0: calls may return ncclInProgress (weft completes them before returning) */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
  int trafficClass;
  const char *commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  /* Added in 2.29. */
  int graphUsageMode;
  int numRmaCtx;
  /* The 8 bytes 2.30 added; weft reads none of them. */
  unsigned char reserved2_30[8];
} ncclConfig_t;

/* clang-format off */
#define NCCL_CONFIG_INITIALIZER {                                  \
  sizeof(ncclConfig_t),                             /* size */     \
  NCCL_API_MAGIC,                                   /* magic */    \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */  \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* blocking, cgaClusterSize */       \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* minCTAs, maxCTAs */               \
  NCCL_CONFIG_UNDEF_PTR,                            /* netName */                        \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* splitShare, trafficClass */       \
  NCCL_CONFIG_UNDEF_PTR,                            /* commName */                       \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* collnetEnable, CTAPolicy */       \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* shrinkShare, nvlsCTAs */          \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* nChannelsPerNetPeer, nvlinkCentricSched */ \
  NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,     /* graphUsageMode, numRmaCtx */      \
  {0}                                               /* reserved2_30 */                   \
}
/* clang-format on */

/* What ncclGroupSimulateEnd reports. Its magic differs from NCCL_API_MAGIC. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                                        \
  {                                                                                      \
    sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_UNDEF_FLOAT                                                                 \
  }

/* Reductions. Values from ncclNumOps up to ncclMaxRedOp name operators made by
 * ncclRedOpCreatePreMulSum. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where ncclRedOpCreatePreMulSum's scalar lives. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* ncclCommMemStats's statistics. */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

/* One wait of ncclWaitSignal. */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* Each call is declared twice, as NCCL does: ncclX, and pncclX for profilers that interpose
 * on ncclX and call through. */
#define WEFT_NCCL_DECLARE(ret, name, args) \
  ret name args;                           \
  ret p##name args

/* ---- Library ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size));
WEFT_NCCL_DECLARE(ncclResult_t, ncclMemFree, (void *ptr));
WEFT_NCCL_DECLARE(ncclResult_t, ncclGetVersion, (int *version));
WEFT_NCCL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
WEFT_NCCL_DECLARE(const char *, ncclGetErrorString, (ncclResult_t result));
WEFT_NCCL_DECLARE(const char *, ncclGetLastError, (ncclComm_t comm));
WEFT_NCCL_DECLARE(void, ncclResetDebugInit, (void));

/* ---- Communicators ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank,
                   ncclConfig_t *config));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitRank,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                   ncclConfig_t *config));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommShrink,
                  (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                   ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *uniqueId));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommGrow,
                  (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                   ncclComm_t *newcomm, ncclConfig_t *config));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommResume, (ncclComm_t comm));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommMemStats,
                  (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value));

/* ---- Buffer registration and windows ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommRegister,
                  (const ncclComm_t comm, void *buff, size_t size, void **handle));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                  (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags));
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
WEFT_NCCL_DECLARE(ncclResult_t, ncclWinGetUserPtr,
                  (ncclComm_t comm, ncclWindow_t win, void **outUserPtr));

/* ---- Reduction operators ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype,
                   ncclScalarResidence_t residence, ncclComm_t comm));
WEFT_NCCL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

/* ---- Collectives ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclReduce,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclBcast,
                  (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                   cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclBroadcast,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclAllReduce,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclReduceScatter,
                  (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclAllGather,
                  (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclAlltoAll,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclGather,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclScatter,
                  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));

/* ---- Point to point ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclSend,
                  (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclRecv,
                  (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream));

/* ---- One-sided ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclPutSignal,
                  (const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                   unsigned int flags, ncclComm_t comm, cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclSignal,
                  (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                   cudaStream_t stream));
WEFT_NCCL_DECLARE(ncclResult_t, ncclWaitSignal,
                  (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                   cudaStream_t stream));

/* ---- Groups ---- */
WEFT_NCCL_DECLARE(ncclResult_t, ncclGroupStart, (void));
WEFT_NCCL_DECLARE(ncclResult_t, ncclGroupEnd, (void));
WEFT_NCCL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

#undef WEFT_NCCL_DECLARE

#ifdef __cplusplus
}
#endif

#endif /* WEFT_NCCL_H_ */
