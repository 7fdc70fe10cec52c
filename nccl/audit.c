/* audit.c -- an rtld-audit module (LD_AUDIT, see rtld-audit(7)) that makes the dynamic loader
 * load weft's libnccl.so.2 wherever a program asks for libnccl.so.2 (or libnccl.so).
 *
 * Why not LD_LIBRARY_PATH: libtorch_cuda.so finds NVIDIA's libnccl.so.2 through a DT_RPATH to the
 * nvidia-nccl wheel, which the loader searches before LD_LIBRARY_PATH. Why not LD_PRELOAD: it
 * maps weft's library into every process that inherits the variable, NCCL program or not. This
 * module only renames what the loader is about to search for, before any search path is tried
 * (LA_SER_ORIG), so a path it returns is opened as it is; a process that never asks for libnccl
 * loads nothing of weft's.
 *
 * Which file: $WEFT_NCCL_LIBRARY if set, else libnccl.so.2 in this module's own folder (it is
 * installed and packaged next to it). If that file is missing, the request goes on unchanged,
 * and one line on stderr says so (WEFT_NCCL_AUDIT_QUIET silences it).
 *
 * The module runs in the loader's audit namespace, with a libc of its own: it uses nothing of
 * weft's, and keeps to getenv, dladdr, access and write. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEFT_NCCL_NAME "libnccl.so.2"

/* Decided at the first request for libnccl (the loader calls la_objsearch under its own lock, so
 * no two calls overlap): 0 not yet, 1 redirect to `target`, -1 leave requests alone. */
static int state;
static char target[PATH_MAX];

__attribute__((visibility("default"))) unsigned int la_version(unsigned int version) {
  (void)version;
  return LAV_CURRENT;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static int is_nccl(const char *name) {
  const char *b = base_name(name);
  return strcmp(b, "libnccl.so.2") == 0 || strcmp(b, "libnccl.so") == 0;
}

/* This module's folder + "/libnccl.so.2" into `out`; -1 with a reason in `why` if unknown. */
static int beside_self(char *out, size_t len, char *why, size_t whylen) {
  Dl_info info;
  if (dladdr((void *)&la_version, &info) == 0 || info.dli_fname == NULL ||
      strchr(info.dli_fname, '/') == NULL) {
    snprintf(why, whylen, "cannot tell which folder the audit module was loaded from");
    return -1;
  }
  const char *b = base_name(info.dli_fname);
  int n = snprintf(out, len, "%.*s" WEFT_NCCL_NAME, (int)(b - info.dli_fname), info.dli_fname);
  if (n < 0 || (size_t)n >= len) {
    snprintf(why, whylen, "the audit module's path is too long");
    return -1;
  }
  return 0;
}

static void warn(const char *why) {
  const char *quiet = getenv("WEFT_NCCL_AUDIT_QUIET");
  if (quiet && quiet[0]) return;
  char line[PATH_MAX + 256];
  int n = snprintf(line, sizeof(line),
                   "weft: not loading weft's libnccl.so.2 (%s); NCCL comes from the usual "
                   "search path. Set WEFT_NCCL_LIBRARY to weft's libnccl.so.2.\n",
                   why);
  if (n < 0) return;
  if ((size_t)n >= sizeof(line)) n = (int)sizeof(line) - 1;
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  (void)w; /* nothing to do if stderr is gone */
}

static void decide(void) {
  char why[PATH_MAX + 128];
  const char *env = getenv("WEFT_NCCL_LIBRARY");
  if (env && env[0]) {
    if (strlen(env) >= sizeof(target)) {
      warn("WEFT_NCCL_LIBRARY is longer than PATH_MAX");
      state = -1;
      return;
    }
    strcpy(target, env);
  } else if (beside_self(target, sizeof(target), why, sizeof(why)) != 0) {
    warn(why);
    state = -1;
    return;
  }
  if (access(target, R_OK) != 0) {
    snprintf(why, sizeof(why), "%s: %s%s", target, strerror(errno),
             env && env[0] ? ", from WEFT_NCCL_LIBRARY" : "");
    warn(why);
    state = -1;
    return;
  }
  state = 1;
}

__attribute__((visibility("default"))) char *la_objsearch(const char *name, uintptr_t *cookie,
                                                          unsigned int flag) {
  (void)cookie;
  /* Only the name as asked for: a path returned here is opened directly, while at the later
   * stages the loader has already chosen a folder (the wheel's, from DT_RPATH). */
  if (flag != LA_SER_ORIG || !is_nccl(name)) return (char *)name;
  if (state == 0) decide();
  return state == 1 ? target : (char *)name;
}
