#!/bin/bash
# sass_report.sh -- lists, per kernel of reduce_kernels.cu, its 128-bit global loads and stores in
# the sm_90 SASS, and fails if a reduction or the 16-byte copy has none (the 16-byte body is what
# makes these kernels keep up with cudaMemcpy; the 8-, 4-, 2- and 1-byte copies are for buffers
# whose alignments differ and are expected to have none).
#
# Then, for devloop_kernel.cu (the device-resident loop), the instructions its memory-ordering
# contract rests on: the counters' system-scope loads and stores (LD/LDG ...STRONG.SYS), the
# fences of the release stores (MEMBAR ...SYS) and the L1 invalidation of the acquire loads
# (CCTL.IVALL), the non-aligned block barriers (BAR.SYNC 0x1), the back-off (NANOSLEEP) and the
# clock (SR_GLOBALTIMER); it fails if the strong system-scope loads and stores or the fences are
# missing.
#
# Compiles the file as kernels/cuda/BUILD does (same nvcc, -O3, sm_90) but to a bare cubin, and
# disassembles it with the toolkit's cuobjdump. A toolkit without cuobjdump can borrow an older
# one: CUOBJDUMP=/path/to/cuobjdump (e.g. Debian's nvidia-cuda-toolkit 11.8). Those cannot read the
# ELF header layout of CUDA 12.8 and later, so the header is rewritten into the old layout first
# (OS/ABI 0x33, ABI version 7, flags sm | 0x500 | sm << 16); the instructions themselves do not
# depend on the toolkit. Needs python3 for that. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

dump=${CUOBJDUMP:-$cuda/bin/cuobjdump}
if [ -z "${CUOBJDUMP:-}" ] && [ ! -x "$dump" ]; then
  echo "sass_report: no $dump; set CUOBJDUMP to another cuobjdump" >&2
  exit 2
fi
# sass SRC OUT: compiles kernels/cuda/SRC to an sm_90 cubin and writes its SASS to OUT.
sass() {
  "$cuda/bin/nvcc" -std=c++17 -O3 -I. -arch=sm_90 -cubin "kernels/cuda/$1" -o "$tmp/k.cubin"
  if ! "$dump" -sass "$tmp/k.cubin" >"$2" 2>"$tmp/err"; then
    python3 - "$tmp/k.cubin" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
sm = (struct.unpack_from("<I", b, 0x30)[0] >> 8) & 0xff
b[7], b[8] = 0x33, 7
struct.pack_into("<I", b, 0x30, sm | 0x500 | sm << 16)
open(sys.argv[1], "wb").write(b)
EOF
    "$dump" -sass "$tmp/k.cubin" >"$2"
  fi
}
sass reduce_kernels.cu "$tmp/k.sass"
sass devloop_kernel.cu "$tmp/loop.sass"
demangle=cat
command -v c++filt >/dev/null && demangle=c++filt

grep -q "code for sm_90" "$tmp/k.sass" || { echo "sass_report: no sm_90 code" >&2; exit 1; }
awk '/Function :/ { name = $3; names[++n] = name }
     /LDG\.E\.128/ { ld[name]++ }
     /STG\.E\.128/ { st[name]++ }
     END {
       bad = 0
       for (i = 1; i <= n; i++) {
         printf "%3d LDG.E.128 %3d STG.E.128  %s\n", ld[names[i]], st[names[i]], names[i]
         want = names[i] ~ /reduce_kernelI/ || names[i] ~ /copy_kernelI5uint4/
         if (want && (ld[names[i]] == 0 || st[names[i]] == 0)) bad++
       }
       printf "%d kernels; reductions and 16-byte copy without 128-bit loads and stores: %d\n", n, bad
       exit bad != 0
     }' "$tmp/k.sass" | $demangle | sed 's/(anonymous namespace):://g'

echo "devloop_kernel.cu (dl_kernel): memory-ordering instructions, count and form"
grep -q "code for sm_90" "$tmp/loop.sass" || { echo "sass_report: no sm_90 code" >&2; exit 1; }
grep -oE '(LDG?|STG?)\.E(\.64)?\.STRONG\.SYS|MEMBAR\.[A-Z]+\.SYS|CCTL\.IVALL|BAR\.SYNC\.DEFER_BLOCKING 0x1|NANOSLEEP|SR_GLOBALTIMER[A-Z]*' \
  "$tmp/loop.sass" | sort | uniq -c
grep -qE 'LDG?\.E\.64\.STRONG\.SYS' "$tmp/loop.sass" &&
  grep -qE 'STG?\.E\.64\.STRONG\.SYS' "$tmp/loop.sass" &&
  grep -qE 'MEMBAR\.[A-Z]+\.SYS' "$tmp/loop.sass" || {
  echo "sass_report: dl_kernel lacks system-scope counter loads, stores or fences" >&2
  exit 1
}
