#!/bin/bash
tag=$1; p=$2; shift 2
r=${RANK:-${OMPI_COMM_WORLD_RANK}}
pin=""; [ $p != none ] && pin="taskset -c ${p:$r:1}"
if [ $r = 0 ]; then exec perf record -q -e cpu-clock:u -F 20000 -o /tmp/place/perf/$tag.data $pin "$@"; fi
exec $pin "$@"
