#!/bin/bash
# pin.sh PLACEMENT cmd...: rank r runs on core PLACEMENT[r]
p=$1; shift
r=${RANK:-${OMPI_COMM_WORLD_RANK}}
exec taskset -c ${p:$r:1} "$@"
