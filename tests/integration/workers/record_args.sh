#!/bin/sh
# A --no_python executable: records its rank and arguments, one per line, in sh_<local_rank>.
out="$DDPRUN_TEST_OUT/sh_$LOCAL_RANK"
{ echo "rank=$RANK"; for a in "$@"; do echo "arg=$a"; done; } > "$out.tmp"
mv "$out.tmp" "$out"
