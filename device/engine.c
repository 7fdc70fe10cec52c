/* engine.c -- opening an engine by name: "cuda", "emulated" or "auto" (WEFT_DEVICE's values). */
#include <string.h>

#include "common/error.h"
#include "device/device.h"

weft_result_t dev_engine_open(const char *name, dev_engine_t **out) {
  *out = NULL;
  if (!name || strcmp(name, "auto") == 0) {
#ifdef WEFT_HAVE_CUDA
    weft_result_t res = cuda_engine_open(out);
    /* No device (or no driver) is not an error for "auto": host buffers only. */
    if (res == WEFT_ERR_UNSUPPORTED) {
      err_clear();
      return WEFT_SUCCESS;
    }
    return res;
#else
    return WEFT_SUCCESS;
#endif
  }
  if (strcmp(name, "cuda") == 0) {
#ifdef WEFT_HAVE_CUDA
    return cuda_engine_open(out);
#else
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "device engine \"cuda\": this build has no CUDA (built without the toolkit, "
                    "or with --config=nocuda)");
#endif
  }
  if (strcmp(name, "emulated") == 0) return emulated_engine_open(out);
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                  "device engine \"%s\": unknown (expected cuda, emulated or auto)", name);
}

void dev_engine_close(dev_engine_t *e) {
  if (e) e->ops->close(e);
}

int dev_engine_current_device(const char *name) {
  if (name && strcmp(name, "emulated") == 0) return 0;
  if (name && strcmp(name, "auto") != 0 && strcmp(name, "cuda") != 0) return -1;
#ifdef WEFT_HAVE_CUDA
  return cuda_current_device();
#else
  return -1;
#endif
}
