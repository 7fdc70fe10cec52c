#!/bin/bash
# The measured rows of collectives/cost_constants.c: weft-bench --tune over tcp and over shm, one
# after the other, 5 times each, 2 ranks (n=2: tune_*.txt, out_*.txt, summary.txt) and 4 ranks
# (n=4: tune4_*, out4_*, summary4.txt). Run from this folder with weft-run and weft-bench in $B
# (bazel build -c opt //tools:weft-run //tools/bench:weft-bench).
B=${B:-../../bazel-bin/tools}
for n in 2 4; do
  p=$([ $n = 2 ] && echo tune || echo tune4)
  o=$([ $n = 2 ] && echo out || echo out4)
  for i in 1 2 3 4 5; do
    for t in tcp shm; do
      WEFT_TRANSPORT=$t nice -n 10 $B/weft-run -n $n --timeout 300 $B/bench/weft-bench \
        --tune ${p}_${t}_$i.txt -C all_reduce -b 8 -e 8 > ${o}_${t}_$i.txt 2>&1
      echo "$t $i rc=$? $(tr '\n' ' ' < ${p}_${t}_$i.txt)"
    done
  done
done
