/* weft_run_bind.c -- --bind core: each local rank on a physical core of its own.
 *
 * Why: two ranks that poll for each other (transport/shm.c's waits) and land on one core stay
 * there, each yielding to the other, and a small all-reduce takes 2.5 us instead of 0.6 (results/
 * 2026-11-28-shm-small-calls); the scheduler does not split them while they keep the core busy.
 * Open MPI's mpirun binds a rank per core by default for this reason. weft-run does not by default,
 * as torchrun does not: several jobs started side by side (a test suite, a shared node) would all
 * stack their ranks on the same first cores.
 *
 * The cores are those of the launcher's own CPU set (taskset, a cgroup's cpuset), grouped by
 * sysfs topology so that hardware threads of one core go to one rank together; local rank i gets
 * the i-th core in order of its lowest CPU. More ranks than cores is refused: two ranks bound to
 * one core is the placement binding exists to avoid. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/weft_run.h"

/* One number from sysfs_cpu/cpuN/topology/NAME, or -1 where the file is missing (some containers
 * and architectures): each CPU then counts as its own core. */
static long topology_value(const char *sysfs_cpu, int cpu, const char *name) {
  char path[WR_PATH_MAX];
  snprintf(path, sizeof path, "%s/cpu%d/topology/%s", sysfs_cpu, cpu, name);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long v = -1;
  if (fscanf(f, "%ld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

int wr_bind_cores(const cpu_set_t *allowed, const char *sysfs_cpu, cpu_set_t *cores, int max) {
  long pkg[CPU_SETSIZE], core[CPU_SETSIZE]; /* per core found: its package and core ids */
  int n = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, allowed)) continue;
    long p = topology_value(sysfs_cpu, cpu, "physical_package_id");
    long c = topology_value(sysfs_cpu, cpu, "core_id");
    int k = 0;
    while (k < n && !(c >= 0 && pkg[k] == p && core[k] == c)) k++;
    if (k == n) {
      if (n == max) return max + 1; /* more cores than asked for: all the caller needs to know */
      CPU_ZERO(&cores[n]);
      pkg[n] = p;
      core[n] = c;
      n++;
    }
    CPU_SET(cpu, &cores[k]);
  }
  return n;
}

int wr_bind_plan(wr_opts *o, char *err, size_t errlen) {
  if (o->bind == WR_BIND_NONE) return WR_EXIT_OK;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    snprintf(err, errlen, "--bind core: cannot read this process's CPU set: %s", strerror(errno));
    return WR_EXIT_USAGE;
  }
  o->bind_sets = calloc((size_t)o->nproc, sizeof(cpu_set_t));
  if (!o->bind_sets) {
    snprintf(err, errlen, "--bind core: out of memory");
    return WR_EXIT_USAGE;
  }
  int have = wr_bind_cores(&allowed, "/sys/devices/system/cpu", o->bind_sets, o->nproc);
  if (have < o->nproc) {
    snprintf(err, errlen,
             "--bind core: %d ranks but %d core%s in this process's CPU set (%d CPUs): a rank "
             "per core needs as many cores as ranks; use fewer ranks or --bind none",
             o->nproc, have, have == 1 ? "" : "s", CPU_COUNT(&allowed));
    free(o->bind_sets);
    o->bind_sets = NULL;
    return WR_EXIT_USAGE;
  }
  return WR_EXIT_OK;
}

int wr_bind_rank(const wr_opts *o, int local) {
  if (o->bind == WR_BIND_NONE || !o->bind_sets) return 0;
  return sched_setaffinity(0, sizeof(cpu_set_t), &o->bind_sets[local]);
}
