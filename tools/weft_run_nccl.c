/* weft_run_nccl.c -- weft-run --nccl: runs the ranks with weft's libnccl.so.2 in place of NVIDIA's.
 *
 * LD_AUDIT (the default) names libweft_nccl_audit.so, which changes only where the loader finds
 * libnccl.so.2, so DT_RPATH (torch's route to the nvidia-nccl wheel) does not matter and a process
 * that never asks for NCCL loads nothing of weft's. --nccl=preload names libnccl.so.2 in LD_PRELOAD
 * instead: every process the ranks start maps it too. Either way the rank's children inherit the
 * variable, as they inherit any environment.
 *
 * Which libnccl.so.2: --nccl-library PATH, else $WEFT_NCCL_LIBRARY, else the first that exists of
 * BIN/../lib/weft, BIN/../lib64/weft (scripts/install.sh's layout) and BIN/../nccl (bazel-bin's),
 * BIN being the folder of weft-run's own binary. The audit module is libweft_nccl_audit.so beside
 * that file (or beside the file its symlinks lead to): both are installed and packaged together. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/weft_run.h"

#define LIB_NAME "libnccl.so.2"
#define AUDIT_NAME "libweft_nccl_audit.so"

/* Where scripts/install.sh and Bazel put the two files, relative to weft-run's own folder. */
static const char *const layouts[] = {"../lib/weft", "../lib64/weft", "../nccl"};

static int exists(const char *path) { return access(path, R_OK) == 0; }

/* `dir`/`name` into out; -1 if it does not fit. */
static int join(char *out, size_t len, const char *dir, size_t dirlen, const char *name) {
  int n = snprintf(out, len, "%.*s/%s", (int)dirlen, dir, name);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The folder part of `path` ("." for a bare name): its length, with *dir pointing at it. */
static size_t dir_of(const char *path, const char **dir) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    *dir = ".";
    return 1;
  }
  *dir = path;
  return slash == path ? 1 : (size_t)(slash - path);
}

/* weft's libnccl.so.2 next to weft-run's binary, per `layouts`, into out. */
static int find_installed(char *out, size_t len, char *err, size_t errlen) {
  char self[WR_PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    snprintf(err, errlen,
             "--nccl: cannot find weft-run's own path (/proc/self/exe: %s); name "
             "weft's libnccl.so.2 with --nccl-library or WEFT_NCCL_LIBRARY",
             strerror(errno));
    return -1;
  }
  self[n] = '\0';
  const char *bin;
  size_t binlen = dir_of(self, &bin);
  char tried[3 * WR_PATH_MAX] = "";
  for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
    char dir[WR_PATH_MAX];
    if (join(dir, sizeof(dir), bin, binlen, layouts[i]) != 0) continue;
    if (join(out, len, dir, strlen(dir), LIB_NAME) == 0 && exists(out)) return 0;
    size_t used = strlen(tried);
    snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "", out);
  }
  snprintf(err, errlen,
           "--nccl: weft's libnccl.so.2 is not where weft-run's install puts it "
           "(%s); name it with --nccl-library PATH or WEFT_NCCL_LIBRARY",
           tried);
  return -1;
}

/* The audit module beside `lib`, or beside the file `lib`'s symlinks lead to. */
static int find_audit(const char *lib, char *out, size_t len) {
  const char *dir;
  size_t dirlen = dir_of(lib, &dir);
  if (join(out, len, dir, dirlen, AUDIT_NAME) == 0 && exists(out)) return 0;
  char real[PATH_MAX];
  if (realpath(lib, real) == NULL) return -1;
  dirlen = dir_of(real, &dir);
  return join(out, len, dir, dirlen, AUDIT_NAME) == 0 && exists(out) ? 0 : -1;
}

/* Absolute, so that a rank (or its children) in another folder loads the same file. */
static int absolute(char *path, size_t len) {
  char real[PATH_MAX];
  if (realpath(path, real) == NULL || strlen(real) >= len) return -1;
  strcpy(path, real);
  return 0;
}

int wr_nccl_resolve(wr_opts *o, char *err, size_t errlen) {
  if (o->nccl == WR_NCCL_OFF) return WR_EXIT_OK;
  const char *given = o->nccl_library, *from = "--nccl-library";
  if (given == NULL || given[0] == '\0') {
    given = getenv("WEFT_NCCL_LIBRARY");
    from = "WEFT_NCCL_LIBRARY";
  }
  if (given != NULL && given[0] != '\0') {
    if (strlen(given) >= sizeof(o->nccl_lib)) {
      snprintf(err, errlen, "%s: path too long", from);
      return WR_EXIT_USAGE;
    }
    strcpy(o->nccl_lib, given);
    if (!exists(o->nccl_lib)) {
      snprintf(err, errlen, "%s: '%s': %s", from, given, strerror(errno));
      return WR_EXIT_USAGE;
    }
  } else if (find_installed(o->nccl_lib, sizeof(o->nccl_lib), err, errlen) != 0) {
    return WR_EXIT_USAGE;
  }
  if (o->nccl == WR_NCCL_AUDIT &&
      find_audit(o->nccl_lib, o->nccl_audit, sizeof(o->nccl_audit)) != 0) {
    snprintf(err, errlen,
             "--nccl: no " AUDIT_NAME
             " beside %s (they are installed together; "
             "--nccl=preload needs only libnccl.so.2)",
             o->nccl_lib);
    return WR_EXIT_USAGE;
  }
  if (absolute(o->nccl_lib, sizeof(o->nccl_lib)) != 0 ||
      (o->nccl == WR_NCCL_AUDIT && absolute(o->nccl_audit, sizeof(o->nccl_audit)) != 0)) {
    snprintf(err, errlen, "--nccl: cannot resolve %s: %s", o->nccl_lib, strerror(errno));
    return WR_EXIT_USAGE;
  }
  return WR_EXIT_OK;
}

/* name=old:path, or name=path; unchanged where old already lists path. The loader splits both
 * LD_AUDIT and LD_PRELOAD at ':'. */
static void append_path(const char *name, const char *path) {
  const char *old = getenv(name);
  if (old == NULL || old[0] == '\0') {
    setenv(name, path, 1);
    return;
  }
  size_t plen = strlen(path);
  for (const char *p = old; (p = strstr(p, path)) != NULL; p += plen)
    if ((p == old || p[-1] == ':' || p[-1] == ' ') &&
        (p[plen] == '\0' || p[plen] == ':' || p[plen] == ' '))
      return;
  size_t len = strlen(old) + 1 + plen + 1;
  char *v = malloc(len);
  if (v == NULL) {
    fprintf(stderr, "weft-run: out of memory setting %s: this rank runs without weft's NCCL\n",
            name);
    return;
  }
  snprintf(v, len, "%s:%s", old, path);
  setenv(name, v, 1);
  free(v);
}

void wr_nccl_setenv(const wr_opts *o) {
  if (o->nccl == WR_NCCL_OFF) return;
  setenv("WEFT_NCCL_LIBRARY", o->nccl_lib, 1);
  if (o->nccl == WR_NCCL_AUDIT)
    append_path("LD_AUDIT", o->nccl_audit);
  else
    append_path("LD_PRELOAD", o->nccl_lib);
}
