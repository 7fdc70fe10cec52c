#!/bin/bash
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p $O
nvidia-smi -L
( timeout 90 ./cuda_engine_test_nodefer --gtest_filter=*WorkRunsWhileAGate* > $O/nodefer.txt 2>&1; echo "nodefer rc=$?" >> $O/nodefer.txt ) &
echo "== cuda_engine_test"; timeout 150 ./cuda_engine_test > $O/cuda_engine.txt 2>&1; echo "rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran|FAILED|Failure" $O/cuda_engine.txt | head -20
echo "== device_mp_test"; WEFT_TEST_DEVICE=cuda timeout 300 ./device_mp_test > $O/device_mp.txt 2>&1; echo "rc=$?"; grep -E "^\[       OK|^\[  FAILED|tests ran|PASSED|Failure|rank [0-9]" $O/device_mp.txt | head -40
wait; echo "== without deferred frees:"; grep -E "OK|FAILED|Failure|did not|rc=|Which is|gate child" $O/nodefer.txt | head
