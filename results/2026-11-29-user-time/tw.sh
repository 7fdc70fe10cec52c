#!/bin/bash
tag=$1; p=$2; shift 2
r=${RANK:-${OMPI_COMM_WORLD_RANK}}
pin=""; [ $p != none ] && pin="taskset -c ${p:$r:1}"
exec /usr/bin/time -o /tmp/place/perf/$tag.time.$r -f "%U %S %e %w %c" $pin "$@"
