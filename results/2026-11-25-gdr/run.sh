#!/bin/bash
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p $O
{
nvidia-smi -L
echo "== rdma devices"; ls /sys/class/infiniband 2>&1; ls /dev/infiniband 2>&1; ldconfig -p | grep -E "ibverbs|rdmacm" ; cat /proc/driver/nvidia/version 2>&1 | head -2; lsmod 2>/dev/null | grep -E "nvidia|peermem|ib_" | head
echo "== cuda_engine_test"; timeout 200 ./cuda_engine_test 2>&1 | grep -E "OK \]|FAILED|SKIPPED|Skipped|rdma|dma" | head -40
echo "== device_mp_test (cuda)"; WEFT_TEST_DEVICE=cuda timeout 240 ./device_mp_test --gtest_filter='DeviceMatrix*:DeviceSlices*:DeviceErrors*' 2>&1 | grep -E "OK \]|FAILED|PASSED" | head -30
echo "== ibverbs_test gdr (skips without a port)"; WEFT_TEST_DEVICE=cuda timeout 60 ./ibverbs_test --gtest_filter='*IbGdr*' 2>&1 | tail -5
} 2>&1 | tee $O/gpu-check.txt
