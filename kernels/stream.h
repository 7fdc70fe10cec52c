/* stream.h -- internal: a copy whose stores bypass the writer's caches (non-temporal stores). */
#ifndef WEFT_KERNELS_STREAM_H_
#define WEFT_KERNELS_STREAM_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* memcpy(dst, src, bytes) (disjoint; any alignment, any count) with the bulk written by
 * non-temporal stores: the bytes go toward memory instead of staying dirty in this core's
 * caches, so another core that reads them next fetches them from there rather than snooping
 * them out of ours. Ends with a store fence: a release store after it (publishing the bytes)
 * cannot become visible before them, which plain release ordering does not promise for
 * non-temporal stores. Where the architecture has no such stores it is memcpy. */
void kern_copy_stream(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_STREAM_H_ */
