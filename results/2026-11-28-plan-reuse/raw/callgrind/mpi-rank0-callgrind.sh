#!/bin/sh
if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec valgrind --tool=callgrind --callgrind-out-file=$CGOUT "$@"; fi
exec "$@"
