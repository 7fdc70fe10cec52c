#!/usr/bin/env bash
# gpu-bundle.sh -- builds everything a GPU machine needs to check weft's device path, copies it
# into one folder (default .gpu/, git-ignored), and writes .gpu/run.sh, which runs it all there:
#
#   scripts/gpu-bundle.sh            # here, where Bazel and the CUDA toolkit are
#   .gpu/run.sh OUTDIR               # on the GPU machine (no Bazel needed): results into OUTDIR
#
# run.sh runs, in order: the CUDA self-test, the device engine contract on CUDA, the kernels
# against the host reductions, the device transports and the multi-process device collectives
# (WEFT_TEST_DEVICE=cuda: 1 to 4 ranks sharing the one GPU), kernel_bw, the device-resident
# loop's kernel (WEFT_CUDA_DEVICE_LOOP=1: contract, links, matrix, all_reduce bench), and
# weft-bench -G cuda over every collective from 8 B to 1 GiB at 2 and 4 ranks (the host-driven
# path, for comparison in the same run). Each part's output goes to its own
# file; a summary line per part says PASS or FAIL.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu}

bins=(
  //tools:weft-run
  //tools/bench:weft-bench
  //tools/kernel_bw:kernel_bw
  //tests/build:build_features_test
  //tests/device:cuda_engine_test
  //tests/kernels_cuda:reduce_kernels_test
  //tests/transport:cuda_ipc_test
  //tests/transport:staged_test
  //tests/transport:devlink_test
  //tests/device_mp:device_mp_test
)
bazel build -c opt "${bins[@]}"
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
rm -rf "$out"
mkdir -p "$out"
for t in "${bins[@]}"; do
  path=${t#//}
  cp -L "$bin/${path%%:*}/${path##*:}" "$out/"
done
grep -qx "/$out/" .git/info/exclude 2>/dev/null || echo "/$out/" >>.git/info/exclude

cat >"$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs weft's GPU checks with the binaries beside this script; results go to $1 (default .).
here=$(cd "$(dirname "$0")" && pwd)
res=${1:-.}
mkdir -p "$res"
export WEFT_TEST_DEVICE=cuda
summary="$res/summary.txt"
: >"$summary"
part() {
  local name=$1
  shift
  if timeout 900 "$@" >"$res/$name.txt" 2>&1; then
    echo "PASS $name" | tee -a "$summary"
  else
    echo "FAIL $name (exit $?)" | tee -a "$summary"
  fi
}
nvidia-smi -L >"$res/gpu.txt" 2>&1 || true
cd "$here"
part build_features ./build_features_test
part cuda_engine ./cuda_engine_test
part kernels ./reduce_kernels_test
part cuda_ipc ./cuda_ipc_test
part staged ./staged_test
part device_collectives ./device_mp_test
part kernel_bw ./kernel_bw -b 1M -e 1G -f 4 -d float -o sum
# The device-resident loop's CUDA kernel, off unless WEFT_CUDA_DEVICE_LOOP=1 (never run before):
# the engine contract's launch cases, device links between processes, the device matrix and the
# knob and abort tests with device programs, then all_reduce with programs next to the
# host-driven path in the same run.
part loop_contract env WEFT_CUDA_DEVICE_LOOP=1 ./cuda_engine_test --gtest_filter='*Launch*'
part loop_devlink env WEFT_CUDA_DEVICE_LOOP=1 ./devlink_test
part loop_device_collectives env WEFT_CUDA_DEVICE_LOOP=1 ./device_mp_test \
  --gtest_filter='*Matrix.OverCudaIpc*:DeviceResident.*:DeviceFused.KilledPeer*'
for n in 2 4; do
  part "loop_bench_all_reduce_${n}ranks" env WEFT_CUDA_DEVICE_LOOP=1 ./weft-run -n "$n" \
    ./weft-bench -G cuda -C all_reduce -b 8 -e 1G -f 4 -n 10 -w 3
done
for n in 2 4; do
  for c in all_reduce broadcast reduce all_gather reduce_scatter sendrecv; do
    part "bench_${c}_${n}ranks" ./weft-run -n "$n" ./weft-bench -G cuda -C "$c" -b 8 -e 1G -f 4 \
      -n 10 -w 3
  done
done
EOF
chmod +x "$out/run.sh"
echo "gpu-bundle: $(ls "$out" | wc -l) files in $out; on the GPU machine: $out/run.sh OUTDIR"
