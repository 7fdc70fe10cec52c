/* abi_probe.c -- prints the ABI facts of whichever nccl.h it is compiled against: struct sizes
 * and field offsets, enum sizes and values, and the constants a program bakes in. abi_test.sh
 * compiles it against weft's nccl/nccl.h and against NVIDIA's and compares the output line by
 * line. Lines starting "weft " describe what NVIDIA's 2.28 header lacks (2.29 and 2.30
 * additions); the script checks those against the published sizes instead. */
#include <stddef.h>
#include <stdio.h>

#include "nccl.h"

#define SIZE(T) printf("sizeof %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) \
  printf("field %s.%s offset %zu size %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define VALUE(x) printf("value %s %lld\n", #x, (long long)(x))

int main(void) {
  SIZE(ncclUniqueId);
  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);
  SIZE(ncclResult_t);
  SIZE(ncclRedOp_t);
  SIZE(ncclDataType_t);
  SIZE(ncclScalarResidence_t);
  SIZE(ncclSimInfo_t);
  FIELD(ncclUniqueId, internal);
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);

  VALUE(NCCL_MAJOR);
  VALUE(NCCL_UNIQUE_ID_BYTES);
  VALUE(NCCL_VERSION(2, 8, 4));
  VALUE(NCCL_VERSION(2, 30, 7));
  VALUE(ncclSuccess);
  VALUE(ncclUnhandledCudaError);
  VALUE(ncclSystemError);
  VALUE(ncclInternalError);
  VALUE(ncclInvalidArgument);
  VALUE(ncclInvalidUsage);
  VALUE(ncclRemoteError);
  VALUE(ncclInProgress);
  VALUE(ncclNumResults);
  VALUE(NCCL_CONFIG_UNDEF_INT);
  VALUE(NCCL_CONFIG_UNDEF_PTR == NULL);
  VALUE(NCCL_SPLIT_NOCOLOR);
  VALUE(NCCL_UNDEF_FLOAT * 1000);
  VALUE(NCCL_WIN_DEFAULT);
  VALUE(NCCL_WIN_COLL_SYMMETRIC);
  VALUE(NCCL_WIN_REQUIRED_ALIGNMENT);
  VALUE(NCCL_CTA_POLICY_DEFAULT);
  VALUE(NCCL_CTA_POLICY_EFFICIENCY);
  VALUE(NCCL_CTA_POLICY_ZERO);
  VALUE(NCCL_SHRINK_DEFAULT);
  VALUE(NCCL_SHRINK_ABORT);
  VALUE(NCCL_REVOKE_DEFAULT);
  VALUE(ncclSum);
  VALUE(ncclProd);
  VALUE(ncclMax);
  VALUE(ncclMin);
  VALUE(ncclAvg);
  VALUE(ncclNumOps);
  VALUE(ncclMaxRedOp);
  VALUE(ncclInt8);
  VALUE(ncclChar);
  VALUE(ncclUint8);
  VALUE(ncclInt32);
  VALUE(ncclInt);
  VALUE(ncclUint32);
  VALUE(ncclInt64);
  VALUE(ncclUint64);
  VALUE(ncclFloat16);
  VALUE(ncclHalf);
  VALUE(ncclFloat32);
  VALUE(ncclFloat);
  VALUE(ncclFloat64);
  VALUE(ncclDouble);
  VALUE(ncclBfloat16);
  VALUE(ncclFloat8e4m3);
  VALUE(ncclFloat8e5m2);
  VALUE(ncclNumTypes);
  VALUE(ncclScalarDevice);
  VALUE(ncclScalarHostImmediate);

  /* What the initializers put in the fields both headers have. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  VALUE(config.magic);
  VALUE(config.blocking);
  VALUE(config.netName == NULL);
  VALUE(config.nvlinkCentricSched);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  VALUE(sim.size);
  VALUE(sim.magic);
  VALUE(sim.estimatedTime * 1000);

#ifdef WEFT_NCCL_H_
  printf("weft sizeof ncclConfig_t %zu\n", sizeof(ncclConfig_t));
  printf("weft config.size %zu\n", config.size);
  printf("weft config.version %u\n", config.version);
  printf("weft offset ncclConfig_t.graphUsageMode %zu\n", offsetof(ncclConfig_t, graphUsageMode));
  printf("weft offset ncclConfig_t.numRmaCtx %zu\n", offsetof(ncclConfig_t, numRmaCtx));
  printf("weft config.numRmaCtx %d\n", config.numRmaCtx);
  printf("weft sizeof ncclWaitSignalDesc_t %zu\n", sizeof(ncclWaitSignalDesc_t));
  printf("weft value NCCL_API_MAGIC %u\n", NCCL_API_MAGIC);
  printf("weft value NCCL_WIN_STRICT_ORDERING %d\n", NCCL_WIN_STRICT_ORDERING);
  printf("weft value NCCL_SUSPEND_MEM %d\n", NCCL_SUSPEND_MEM);
  printf("weft value ncclStatGpuMemTotal %d\n", ncclStatGpuMemTotal);
  printf("weft value NCCL_VERSION_CODE %d\n", NCCL_VERSION_CODE);
#endif
  return 0;
}
