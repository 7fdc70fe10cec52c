/* unsupported.c -- the rest of NCCL's exported API: calls that succeed doing nothing because weft
 * needs nothing from them, calls refused because weft has no counterpart (the device API, one-
 * sided transfers and windows, growing and revoking, the parameter API). Every one is
 * exported so that programs linked against NCCL (libtorch_cuda.so) load; a refused call returns
 * ncclInvalidUsage and says why in ncclGetLastError. */
#include <stdint.h>
#include <stdlib.h>

#include "nccl/nccl_internal.h"

#define REFUSE(name, why) nccl_fail(ncclInvalidUsage, "%s is not supported: %s", #name, why)

/* ---- No-ops that succeed ---- */

/* weft registers nothing ahead of a call (its transports register what they need), so a
 * registration is a handle that stands for the buffer. */
NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void *buff, size_t size,
         void **handle) {
  (void)size;
  ncclResult_t res = nccl_check_comm(comm, "ncclCommRegister");
  if (res != ncclSuccess) return res;
  if (!handle) return nccl_fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  *handle = buff;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void *handle) {
  (void)handle;
  return nccl_check_comm(comm, "ncclCommDeregister");
}

/* weft holds no device memory that it could give back while idle. */
NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  (void)flags;
  return nccl_check_comm(comm, "ncclCommSuspend");
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  return nccl_check_comm(comm, "ncclCommResume");
}

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value) {
  (void)stat;
  ncclResult_t res = nccl_check_comm(comm, "ncclCommMemStats");
  if (res != ncclSuccess) return res;
  if (!value) return nccl_fail(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  *value = 0;
  return ncclSuccess;
}

/* weft reads its environment once per communicator, so there is no debug state to reset. */
NCCL_API(void, ncclResetDebugInit, void) {}

/* ---- Refused: no counterpart in weft ---- */

#define NO_WINDOWS "weft has no memory windows (one-sided access to a peer's registered buffer)"
#define NO_DEVICE_API "weft has no device-side API (kernels calling into the library)"

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size,
         ncclWindow_t *win, int winFlags) {
  (void)comm, (void)buff, (void)size, (void)winFlags;
  if (win) *win = NULL;
  return REFUSE(ncclCommWindowRegister, NO_WINDOWS);
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  (void)comm, (void)win;
  return REFUSE(ncclCommWindowDeregister, NO_WINDOWS);
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void **outUserPtr) {
  (void)comm, (void)win, (void)outUserPtr;
  return REFUSE(ncclWinGetUserPtr, NO_WINDOWS);
}

NCCL_API(ncclResult_t, ncclPutSignal, const void *localbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
         unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  (void)localbuff, (void)count, (void)datatype, (void)peer, (void)peerWin, (void)peerWinOffset;
  (void)sigIdx, (void)ctx, (void)flags, (void)comm, (void)stream;
  return REFUSE(ncclPutSignal, NO_WINDOWS);
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags,
         ncclComm_t comm, cudaStream_t stream) {
  (void)peer, (void)sigIdx, (void)ctx, (void)flags, (void)comm, (void)stream;
  return REFUSE(ncclSignal, NO_WINDOWS);
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t *signalDescs,
         ncclComm_t comm, cudaStream_t stream) {
  (void)nDesc, (void)signalDescs, (void)comm, (void)stream;
  return REFUSE(ncclWaitSignal, NO_WINDOWS);
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  (void)comm, (void)revokeFlags;
  return REFUSE(ncclCommRevoke,
                "use ncclCommAbort to end a communicator's operations, then ncclCommShrink");
}

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId *uniqueId) {
  (void)comm, (void)uniqueId;
  return REFUSE(ncclCommGetUniqueId, "it serves ncclCommGrow, and weft cannot grow a communicator");
}

NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
         int rank, ncclComm_t *newcomm, ncclConfig_t *config) {
  (void)comm, (void)nRanks, (void)uniqueId, (void)rank, (void)config;
  if (newcomm) *newcomm = NULL;
  return REFUSE(ncclCommGrow, "weft cannot add ranks to a communicator; make a new one");
}

/* The device API of NCCL's nccl_device.h. Its types are opaque here: weft never reads them. */
typedef struct {
  int nRanks, rank, stride;
} weft_nccl_team_t;

NCCL_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, void *props) {
  (void)comm, (void)props;
  return REFUSE(ncclCommQueryProperties, NO_DEVICE_API);
}
NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const void *reqs, void *outDevComm) {
  (void)comm, (void)reqs, (void)outDevComm;
  return REFUSE(ncclDevCommCreate, NO_DEVICE_API);
}
NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const void *devComm) {
  (void)comm, (void)devComm;
  return REFUSE(ncclDevCommDestroy, NO_DEVICE_API);
}

/* The four pointer queries take (window, offset, ...): weft refuses before reading the rest. */
#define POINTER_QUERY(name)                                          \
  NCCL_API(ncclResult_t, name, ncclWindow_t window, size_t offset) { \
    (void)window, (void)offset;                                      \
    return REFUSE(name, NO_DEVICE_API);                              \
  }
POINTER_QUERY(ncclGetLsaMultimemDevicePointer)
POINTER_QUERY(ncclGetMultimemDevicePointer)
POINTER_QUERY(ncclGetLsaDevicePointer)
POINTER_QUERY(ncclGetPeerDevicePointer)

/* The resource requirements of device-side barriers and all-to-alls: refused unread. */
#define REQUIREMENT(name) \
  NCCL_API(ncclResult_t, name, void) { return REFUSE(name, NO_DEVICE_API); }
REQUIREMENT(ncclGinBarrierCreateRequirement)
REQUIREMENT(ncclGinInboxA2ACreateRequirement)
REQUIREMENT(ncclGinOutboxCreateRequirement)
REQUIREMENT(ncclLsaBarrierCreateRequirement)
REQUIREMENT(ncclLLA2ACreateRequirement)

/* These return a value, not a result: an empty team, rank -1 and 0 slots, and the reason in
 * ncclGetLastError. */
#define TEAM(name)                                    \
  NCCL_API(weft_nccl_team_t, name, ncclComm_t comm) { \
    (void)comm;                                       \
    REFUSE(name, NO_DEVICE_API);                      \
    return (weft_nccl_team_t){0, -1, 0};              \
  }
TEAM(ncclTeamWorld)
TEAM(ncclTeamLsa)
TEAM(ncclTeamRail)

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, weft_nccl_team_t team, int rank) {
  (void)comm, (void)team, (void)rank;
  REFUSE(ncclTeamRankToWorld, NO_DEVICE_API);
  return -1;
}
NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, weft_nccl_team_t team, int rank) {
  (void)comm, (void)team, (void)rank;
  REFUSE(ncclTeamRankToLsa, NO_DEVICE_API);
  return -1;
}
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  (void)maxElts, (void)maxEltSize;
  REFUSE(ncclLLA2ACalcSlots, NO_DEVICE_API);
  return 0;
}

/* ---- Refused: settings ---- */

/* NCCL 2.30's parameter API (ncclParam*), which NCCL's 2.29 headers do not declare; weft takes
 * its settings from WEFT_* variables and the NCCL_* ones it maps (docs/gpus.md).
 * Refused unread, whatever the arguments. */
#define NO_PARAMS \
  "weft's settings are environment variables (WEFT_*, and the NCCL_* ones docs/gpus.md maps)"
#define PARAM(name) \
  NCCL_API(ncclResult_t, name, void) { return REFUSE(name, NO_PARAMS); }
PARAM(ncclParamBind)
PARAM(ncclParamDumpAll)
PARAM(ncclParamGet)
PARAM(ncclParamGetAllParameterKeys)
PARAM(ncclParamGetI16)
PARAM(ncclParamGetI32)
PARAM(ncclParamGetI64)
PARAM(ncclParamGetI8)
PARAM(ncclParamGetParameter)
PARAM(ncclParamGetStr)
PARAM(ncclParamGetU16)
PARAM(ncclParamGetU32)
PARAM(ncclParamGetU64)
PARAM(ncclParamGetU8)
