/* fatbin.c -- lists the architectures in an executable's .nv_fatbin section.
 *
 * The section is a run of fat binaries, each a 16-byte header (magic 0xBA55ED50, version, header
 * size, payload size) followed by entries: a header (kind: 1 PTX, 2 SASS; its own size; the
 * payload's size; the architecture as major*10+minor at byte 28) and the code. */
#include "tools/info/fatbin.h"

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define MAX_TARGETS 32

static uint32_t u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint64_t u64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Reads `len` bytes at `off` of f into a new buffer, or NULL. */
static unsigned char *read_at(FILE *f, uint64_t off, uint64_t len) {
  if (len == 0 || len > (1ull << 31)) return NULL;
  unsigned char *buf = malloc(len);
  if (!buf) return NULL;
  if (fseek(f, (long)off, SEEK_SET) != 0 || fread(buf, 1, len, f) != len) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* The .nv_fatbin section's bytes (*len), NULL when there is none. */
static unsigned char *find_section(FILE *f, uint64_t *len, char *why, size_t cap) {
  Elf64_Ehdr eh;
  if (fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr)) {
    snprintf(why, cap, "not a 64-bit ELF file");
    return NULL;
  }
  Elf64_Shdr *sh = (Elf64_Shdr *)read_at(f, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof *sh);
  if (!sh || eh.e_shstrndx >= eh.e_shnum) {
    free(sh);
    snprintf(why, cap, "cannot read the section headers");
    return NULL;
  }
  char *names = (char *)read_at(f, sh[eh.e_shstrndx].sh_offset, sh[eh.e_shstrndx].sh_size);
  unsigned char *data = NULL;
  for (int i = 0; names && i < eh.e_shnum && !data; i++) {
    if (sh[i].sh_name >= sh[eh.e_shstrndx].sh_size) continue;
    if (strncmp(names + sh[i].sh_name, ".nv_fatbin", sh[eh.e_shstrndx].sh_size - sh[i].sh_name))
      continue;
    *len = sh[i].sh_size;
    data = read_at(f, sh[i].sh_offset, sh[i].sh_size);
  }
  free(names);
  free(sh);
  return data;
}

int fatbin_targets(const char *path, char *out, size_t cap) {
  out[0] = '\0';
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(out, cap, "%s: %s", path, strerror(errno));
    return -1;
  }
  uint64_t len = 0;
  char why[128] = "";
  unsigned char *d = find_section(f, &len, why, sizeof why);
  fclose(f);
  if (!d) {
    if (!why[0]) return 0; /* no GPU code */
    snprintf(out, cap, "%s: %s", path, why);
    return -1;
  }
  int kinds[MAX_TARGETS], archs[MAX_TARGETS], n = 0;
  uint64_t off = 0;
  /* Fat binaries are 8-byte aligned in the section; padding between them is zero. */
  while (off + 16 <= len) {
    if (u32(d + off) != FATBIN_MAGIC) {
      off += 8;
      continue;
    }
    uint64_t hs = d[off + 6] | (uint64_t)d[off + 7] << 8, size = u64(d + off + 8);
    uint64_t p = off + hs, end = off + hs + size;
    if (end > len || hs < 16) break;
    while (p + 32 <= end) {
      int kind = d[p] | d[p + 1] << 8;
      uint64_t ehs = u32(d + p + 4), esize = u64(d + p + 8);
      int arch = (int)u32(d + p + 28);
      int seen = 0;
      for (int i = 0; i < n; i++) seen |= kinds[i] == kind && archs[i] == arch;
      if (!seen && n < MAX_TARGETS && (kind == 1 || kind == 2)) {
        kinds[n] = kind;
        archs[n++] = arch;
      }
      if (ehs == 0 || p + ehs + esize > end) break;
      p += ehs + esize;
    }
    off = (end + 7) & ~(uint64_t)7;
  }
  free(d);
  size_t used = 0;
  for (int pass = 2; pass >= 1; pass--) /* SASS first, then PTX */
    for (int i = 0; i < n; i++)
      if (kinds[i] == pass && used < cap)
        used += (size_t)snprintf(out + used, cap - used, "%s%s_%d", used ? " " : "",
                                 pass == 2 ? "sm" : "compute", archs[i]);
  return n;
}
