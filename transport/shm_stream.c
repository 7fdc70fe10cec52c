/* shm_stream.c -- the choice between plain and non-temporal slot writes (shm_stream.h). */
#include "transport/shm_stream.h"

int shm_stream_note(shm_stream_timer_t *t, int streamed, size_t bytes, int64_t ns) {
  if (bytes == 0) return 0;
  int k = streamed ? 1 : 0;
  int64_t per = (int64_t)((double)ns * 65536.0 / (double)bytes);
  if (per < 1) per = 1;
  if (t->block_n[k] == 0 || per < t->block_min[k]) t->block_min[k] = per;
  if (++t->block_n[k] < SHM_STREAM_BLOCK) return 0;
  t->measure[k] = t->block_min[k];
  t->block_n[k] = 0;
  return 1;
}

int shm_stream_better(const int64_t read[2], const int64_t write[2], int was) {
  if (!read[0] || !read[1] || !write[0] || !write[1]) return was;
  int64_t plain = read[0] + write[0], streamed = read[1] + write[1];
  if (streamed * 5 < plain * 4) return 1;
  if (plain * 5 < streamed * 4) return 0;
  return was;
}

int shm_stream_period(int known, uint64_t large) {
  return known || large >= SHM_STREAM_PROBE_SLOTS ? SHM_STREAM_PROBE_SLOTS
                                                  : SHM_STREAM_EXPLORE_SLOTS;
}

int shm_stream_pick(int mode, int preferred, size_t bytes, int period, uint64_t *large) {
  if (mode == SHM_STREAM_ALWAYS) return 1;
  if (mode == SHM_STREAM_NEVER || bytes < SHM_STREAM_MIN_BYTES) return 0;
  return ++*large % (uint64_t)period == 0 ? !preferred : preferred;
}
