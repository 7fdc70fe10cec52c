/* glibc_compat.c -- binds the wheel's libraries to glibc 2.28's symbol versions (manylinux_2_28).
 *
 * glibc 2.34 moved libpthread, libdl and librt into libc.so.6 and gave the moved functions a new
 * version (pthread_create@GLIBC_2.34, dlopen@GLIBC_2.34, ...), keeping the old ones as compat
 * symbols; 2.33 made stat and fstat real functions (before, <sys/stat.h> inlined calls to __xstat
 * and __fxstat). Linked against a newer glibc, libweft.so needs GLIBC_2.34 and no older glibc
 * loads it. The static CUDA runtime (libcudart_static.a) makes most of these calls itself, and its
 * objects cannot be recompiled, so a header that rebinds names at compile time would miss them.
 *
 * Instead the wheel's link (--config=wheel, see BUILD) passes --wrap=NAME for each such function:
 * the linker sends every call to NAME, weft's and the CUDA runtime's alike, to __wrap_NAME, defined
 * here. Each __wrap_NAME is a single jump to NAME at the newest version glibc 2.28 has (a tail jump
 * keeps every argument register and the caller's return address, which dlopen and dlsym use to
 * find the calling object). The versions are the ones in libc.so.6's own table (objdump -T):
 * mostly the x86_64 base version GLIBC_2.2.5; never an older implementation kept for old binaries
 * (pthread_cond_* would be, at 2.2.5, and are left alone: they are at GLIBC_2.3.2 already).
 * scripts/wheel.sh checks the linked libraries need nothing newer than GLIBC_2.28.
 *
 * Each wrapper sits in its own section, so --gc-sections drops those a library does not call,
 * and with them the reference to the old symbol. On glibc < 2.34 these functions live in
 * libpthread.so.0, libdl.so.2 and librt.so.1, which BUILD therefore adds as DT_NEEDED.
 */
#if !defined(__x86_64__) || !defined(__linux__)
#error "glibc_compat.c: the symbol versions below are x86_64 Linux's"
#endif

#include <sys/stat.h>

/* __wrap_NAME: jmp NAME@VERSION. .symver turns this file's (undefined) reference to NAME into one
 * to NAME@VERSION; GNU ld leaves that reference alone when it wraps NAME (gold does not: it would
 * wrap it too, making the jump a loop, which is why BUILD links with -fuse-ld=bfd). */
/* One directive a line (the formatter would split the strings). */
/* clang-format off */
#define COMPAT(name, version)                                  \
  __asm__(".section .text.__wrap_" #name ",\"ax\",@progbits\n" \
          ".globl __wrap_" #name "\n"                          \
          ".hidden __wrap_" #name "\n"                         \
          ".type __wrap_" #name ", @function\n"                \
          "__wrap_" #name ":\n"                                \
          "\tjmp " #name "@PLT\n"                              \
          ".size __wrap_" #name ", .-__wrap_" #name "\n"       \
          ".symver " #name ", " #name "@" #version "\n"        \
          ".previous\n");
/* clang-format on */

/* One COMPAT(name, version) line per function of glibc_228.bzl. */
#include "python/manylinux/glibc_228_list.h"

/* stat and fstat before 2.33: what <sys/stat.h> inlined then, __xstat and __fxstat with the
 * struct-layout version first (_STAT_VER_LINUX, 1 on x86_64, whose struct stat the kernel's is). */
#define STAT_VER_LINUX 1
int compat_xstat(int ver, const char *path, struct stat *buf);
int compat_fxstat(int ver, int fd, struct stat *buf);
__asm__(".symver compat_xstat, __xstat@GLIBC_2.2.5");
__asm__(".symver compat_fxstat, __fxstat@GLIBC_2.2.5");

/* Hidden, and each in its own section like the jumps above. */
#define WRAPPER(name) __attribute__((visibility("hidden"), section(".text.__wrap_" #name)))

WRAPPER(stat) int __wrap_stat(const char *path, struct stat *buf) {
  return compat_xstat(STAT_VER_LINUX, path, buf);
}

WRAPPER(fstat) int __wrap_fstat(int fd, struct stat *buf) {
  return compat_fxstat(STAT_VER_LINUX, fd, buf);
}
