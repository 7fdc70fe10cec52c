/* fatbin.h -- internal to weft-info: the GPU code a program carries, read from its own CUDA fat
 * binaries (the .nv_fatbin section nvcc's objects put in the executable). */
#ifndef WEFT_TOOLS_INFO_FATBIN_H_
#define WEFT_TOOLS_INFO_FATBIN_H_

#include <stddef.h>

/* Writes the distinct targets of the ELF file at `path`, e.g. "sm_90 compute_90" (sm_: SASS,
 * machine code for that architecture; compute_: PTX, which the driver compiles for newer ones).
 * Returns the number of targets (0: the file has no GPU code), or -1 with `out` saying why. */
int fatbin_targets(const char *path, char *out, size_t cap);

#endif /* WEFT_TOOLS_INFO_FATBIN_H_ */
