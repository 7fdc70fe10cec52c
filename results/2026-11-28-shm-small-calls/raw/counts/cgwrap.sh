#!/bin/sh
# rank 0 under callgrind, the others as they are
if [ "$RANK" = 0 ]; then exec valgrind --tool=callgrind --callgrind-out-file=$CGOUT "$@"; fi
exec "$@"
