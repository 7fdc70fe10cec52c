/* shm_stream.h -- internal: whether a shm connection writes its large slots with non-temporal
 * stores (kernels/stream.h), chosen from what each kind costs its writer and its reader.
 *
 * A slot written with plain stores sits dirty in the writer's cache until the reader pulls it
 * over, core to core; one written with non-temporal stores goes to memory, and the reader fetches
 * it from there. Where the two cores share a cache, plain slots cost both sides less (a ring
 * all-reduce of 1 MiB over 2 ranks ran 3x faster with them on the 2-core development VM). Where
 * lines cross between the caches slowly (two sockets, or that VM for seconds at a time, a state
 * of its host) a plainly written slot takes up to 10x longer to read, and non-temporal stores win
 * by 6x (results/2026-11-29-shm-streaming). Which holds is not known in advance and can change
 * while a job runs, so each connection measures: the receiver times how long a large slot's
 * lines take to come over, per kind, and publishes it; the writer times its own writes per kind
 * and writes the kind whose two costs add up to less, and the other kind now and then (one large
 * slot in SHM_STREAM_PROBE_SLOTS) so that every measure stays current. */
#ifndef WEFT_TRANSPORT_SHM_STREAM_H_
#define WEFT_TRANSPORT_SHM_STREAM_H_

#include <stddef.h>
#include <stdint.h>

/* Smaller slots are written plainly and not timed (in auto mode): a small message's latency is a
 * few cache misses, which memory would only lengthen. */
#define SHM_STREAM_MIN_BYTES 16384
/* How often the writer writes a large slot of the kind it does not prefer, one in this many: a
 * probe costs up to 10x a slot's time (a plain slot while lines cross slowly), so 256 keep that
 * under 4%, and a block of probes still comes every few milliseconds at 64 KiB slots. */
#define SHM_STREAM_PROBE_SLOTS 256
/* The same while the writer still lacks one of the four measures (a new connection): every
 * other slot, so that the choice is made within the first few dozen large slots (at 8, a 2-rank
 * all-reduce of 128 KiB was still exploring after 90 of them in the sweep of a benchmark). */
#define SHM_STREAM_EXPLORE_SLOTS 2
/* Slots of the preferred kind each side times, one in this many (every probe is timed): a
 * timing costs two clock reads, and the reader's a pass over the slot's lines before the
 * receive's own, which measured 5% at 1 in 8 (2 ranks, 256 KiB-4 MiB). */
#define SHM_STREAM_SAMPLE 32
/* Timings per kind before their fastest becomes that kind's measure: the fastest of a few leaves
 * out the ones a descheduling or an interrupt lengthened. */
#define SHM_STREAM_BLOCK 8

/* WEFT_SHM_STREAM's values. */
enum { SHM_STREAM_AUTO = -1, SHM_STREAM_NEVER = 0, SHM_STREAM_ALWAYS = 1 };

/* Timings of one side per kind (0 plain, 1 streamed), in ns per 64 KiB. */
typedef struct {
  int64_t block_min[2]; /* fastest of the block being gathered */
  int block_n[2];
  int64_t measure[2]; /* fastest of the last full block; 0 = none yet */
} shm_stream_timer_t;

/* Counts one timing: `bytes` (> 0) of kind `streamed` took `ns`. Returns 1 when it completed a
 * block, renewing that kind's measure. */
int shm_stream_note(shm_stream_timer_t *t, int streamed, size_t bytes, int64_t ns);

/* The writer's choice from the reader's measures and its own: 1 where a streamed slot costs
 * clearly less (by a fifth) all told, 0 where a plain one does, else `was`; `was` too while a
 * measure is missing. */
int shm_stream_better(const int64_t read[2], const int64_t write[2], int was);

/* The probe period for the writer's next large slot: SHM_STREAM_EXPLORE_SLOTS while `known` (all
 * four measures in) is 0, for at most SHM_STREAM_PROBE_SLOTS large slots (`large` so far: a peer
 * that never times its reads, WEFT_SHM_STREAM=0 there, must not keep it exploring), then
 * SHM_STREAM_PROBE_SLOTS. */
int shm_stream_period(int known, uint64_t large);

/* Whether the next slot, of `bytes`, goes streamed. `mode` is WEFT_SHM_STREAM, `preferred` the
 * writer's choice, `period` how many large slots go per probe (SHM_STREAM_PROBE_SLOTS, or
 * SHM_STREAM_EXPLORE_SLOTS); *large counts the large slots picked for so far (start at 0). */
int shm_stream_pick(int mode, int preferred, size_t bytes, int period, uint64_t *large);

#endif /* WEFT_TRANSPORT_SHM_STREAM_H_ */
