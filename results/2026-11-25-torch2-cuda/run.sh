#!/bin/bash
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p $O
export PYTHONPATH=$PWD/py
{
python3 -c "import torch, weft, sys; print(sys.version.split()[0], 'torch', torch.__version__, 'weft at', weft.__file__)"
for n in 2 4; do
echo "== torchrun --nproc-per-node $n cuda_backend_check.py"
WEFT_TIMEOUT_MS=60000 timeout 240 python3 -m torch.distributed.run --nproc-per-node $n cuda_backend_check.py 2>&1 | grep -vE "^W1|OMP_NUM_THREADS|^\*+$|Setting OMP" | tail -25
echo "exit status $?"
done
} 2>&1 | tee $O/cuda-backend.txt
