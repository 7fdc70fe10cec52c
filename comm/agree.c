/* agree.c -- the settings that must match on every rank, and their comparison (agree.h).
 *
 * What must match, and why (everything else may differ between ranks):
 *   WEFT_TRANSPORT          which transports exist: a shm-only rank has no TCP to reach a tcp one
 *   WEFT_SLICE_BYTES,       how a chunk is cut into slices and rounds (collectives_api.c), and the
 *   WEFT_SHM_SLOTS          size of a shm or verbs ring that both ends map: both must cut alike
 *   WEFT_DEVICE_SLICE_BYTES the same two for calls on device buffers (config_for_device)
 *   WEFT_DEVICE_SLOTS
 *   WEFT_DEVICE_RESIDENT    whether device calls run as device programs: a program's messages are
 *                           cut and ordered otherwise than the executor's (kernels/devprog.h)
 *   WEFT_NSOCKS             the TCP handshake refuses a peer with another number of lanes
 *   WEFT_ALGO,              which schedule a call runs: two ranks on different algorithms wait
 *   WEFT_HIERARCHY,         for messages the other never sends
 *   WEFT_TUNE_FILE          (what it gives: the model, or the constants it replaces; without
 *                           one, every rank uses the committed constants alike)
 *   WORLD_SIZE, job id      the store checks them in its hello already; repeated for the record
 * May differ: timeouts, WEFT_DEBUG, WEFT_SPIN_US, WEFT_ASYNC_SPIN_US, WEFT_TRACE*,
 * WEFT_SOCKET_BUFFER, interfaces, WEFT_SLICES_IN_FLIGHT (how far ahead a rank posts; the wire is
 * an ordered stream either way),
 * WEFT_FUSED_STEPS (how a rank computes the slice it sends, not what it sends), the WEFT_IB_*
 * knobs (per port; GPUDirect is used only where both ends publish it) and WEFT_DEVICE. The job
 * token is checked by the store and never published. */
#include "comm/agree.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

#define AGREE_MAGIC 0x45455241u /* "AREE": init filled the settings in */

/* Fixed layout, zero-filled, so that every field compares as bytes. */
typedef struct {
  uint32_t magic;
  int32_t world_size;
  uint64_t job_id;
  char transport[16];
  uint64_t slice_bytes, device_slice_bytes;
  int32_t shm_slots, device_slots, nsocks, hierarchy, device_resident;
  char algo[256];
  char tune[112]; /* "none (...)", the model WEFT_TUNE_FILE gave, or a hash of what it gave */
} settings_t;

_Static_assert(sizeof(settings_t) <= sizeof(((boot_record_t *)0)->settings),
               "the settings must fit their blob");

typedef enum { AS_TEXT, AS_I32, AS_U64, AS_HEX } kind_t;

typedef struct {
  const char *name;
  kind_t kind;
  size_t offset, size;
} setting_t;

#define FIELD(f) offsetof(settings_t, f), sizeof(((settings_t *)0)->f)

/* In the order they are checked: the most basic first, since one difference often explains the
 * next (another job, then another world, then another transport). */
static const setting_t settings[] = {
    {"the job id (WEFT_JOB_ID or the launcher's)", AS_HEX, FIELD(job_id)},
    {"WORLD_SIZE", AS_I32, FIELD(world_size)},
    {"WEFT_TRANSPORT", AS_TEXT, FIELD(transport)},
    {"WEFT_NSOCKS", AS_I32, FIELD(nsocks)},
    {"WEFT_SLICE_BYTES", AS_U64, FIELD(slice_bytes)},
    {"WEFT_SHM_SLOTS", AS_I32, FIELD(shm_slots)},
    {"WEFT_DEVICE_SLICE_BYTES", AS_U64, FIELD(device_slice_bytes)},
    {"WEFT_DEVICE_SLOTS", AS_I32, FIELD(device_slots)},
    {"WEFT_DEVICE_RESIDENT", AS_I32, FIELD(device_resident)},
    {"WEFT_ALGO", AS_TEXT, FIELD(algo)},
    {"WEFT_HIERARCHY", AS_I32, FIELD(hierarchy)},
    {"the cost model from WEFT_TUNE_FILE", AS_TEXT, FIELD(tune)},
};

void agree_fill(const weft_comm_t *c, uint64_t job_id, boot_record_t *mine) {
  settings_t s;
  memset(&s, 0, sizeof s);
  s.magic = AGREE_MAGIC;
  s.world_size = c->nranks;
  s.job_id = job_id;
  snprintf(s.transport, sizeof s.transport, "%s", c->config.transport);
  s.slice_bytes = c->config.slice_bytes;
  s.device_slice_bytes = c->config.device_slice_bytes;
  s.shm_slots = c->config.shm_slots;
  s.device_slots = c->config.device_slots;
  s.device_resident = c->config.device_resident;
  s.nsocks = c->config.nsocks;
  s.hierarchy = c->config.hierarchy;
  snprintf(s.algo, sizeof s.algo, "%s", c->config.algo);
  /* The model, not the file's path: the same file may sit at different paths on two hosts. */
  int replaced = memcmp(&c->costs, cost_constants(), sizeof c->costs) != 0;
  if (replaced) {
    /* Constants and model do not fit as text: their bits, hashed (FNV-1a). */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)&c->costs;
    for (size_t i = 0; i < sizeof c->costs; i++) h = (h ^ p[i]) * 1099511628211ull;
    const double model[3] = {c->model.alpha, c->model.beta, c->model.gamma};
    p = (const unsigned char *)model;
    for (size_t i = 0; c->model_tuned && i < sizeof model; i++) h = (h ^ p[i]) * 1099511628211ull;
    snprintf(s.tune, sizeof s.tune, "constants%s replaced, hash 0x%016llx",
             c->model_tuned ? " and model" : "", (unsigned long long)h);
  } else if (c->model_tuned) {
    snprintf(s.tune, sizeof s.tune, "alpha %.17g s, beta %.17g s/B, gamma %.17g s/B",
             c->model.alpha, c->model.beta, c->model.gamma);
  } else {
    snprintf(s.tune, sizeof s.tune, "none (the committed constants)");
  }
  memset(mine->settings, 0, sizeof mine->settings);
  memcpy(mine->settings, &s, sizeof s);
}

static void format_value(const setting_t *k, const settings_t *s, char *buf, size_t cap) {
  const char *p = (const char *)s + k->offset;
  int32_t i32;
  uint64_t u64;
  switch (k->kind) {
    case AS_TEXT:
      snprintf(buf, cap, "\"%.*s\"", (int)k->size, p);
      break;
    case AS_I32:
      memcpy(&i32, p, sizeof i32);
      snprintf(buf, cap, "%d", (int)i32);
      break;
    case AS_U64:
      memcpy(&u64, p, sizeof u64);
      snprintf(buf, cap, "%llu", (unsigned long long)u64);
      break;
    case AS_HEX:
      memcpy(&u64, p, sizeof u64);
      snprintf(buf, cap, "0x%016llx", (unsigned long long)u64);
      break;
  }
}

/* NULL when the settings can be compared as they are, else what is wrong with them. */
static const char *settings_problem(const settings_t *s) {
  if (s->magic != AGREE_MAGIC) return "it carries no settings";
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
    if (settings[i].kind == AS_TEXT &&
        !memchr((const char *)s + settings[i].offset, '\0', settings[i].size))
      return "a text setting does not end";
  return NULL;
}

weft_result_t agree_check(const weft_comm_t *c, const boot_record_t *all) {
  settings_t first, other;
  memcpy(&first, all[0].settings, sizeof first);
  for (int r = 0; r < c->nranks; r++) {
    memcpy(&other, all[r].settings, sizeof other);
    const char *problem = settings_problem(&other);
    if (problem)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "rank %d: rank %d published malformed settings: %s (different weft "
                      "versions?)",
                      c->rank, r, problem);
    for (size_t i = 0; r > 0 && i < sizeof settings / sizeof settings[0]; i++) {
      const setting_t *k = &settings[i];
      if (memcmp((const char *)&first + k->offset, (const char *)&other + k->offset, k->size) == 0)
        continue;
      char a[300], b[300];
      format_value(k, &first, a, sizeof a);
      format_value(k, &other, b, sizeof b);
      return WEFT_ERR(WEFT_ERR_MISMATCH,
                      "rank %d: %s differs between ranks: %s on rank 0, %s on rank %d (every "
                      "rank must use the same)",
                      c->rank, k->name, a, b, r);
    }
  }
  return WEFT_SUCCESS;
}
