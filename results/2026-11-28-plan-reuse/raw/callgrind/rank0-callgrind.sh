#!/bin/sh
# rank 0 under callgrind (CGOUT: its output file), the others as they are
if [ "$RANK" = 0 ]; then exec valgrind --tool=callgrind --callgrind-out-file=$CGOUT "$@"; fi
exec "$@"
