#!/bin/sh
# Writes fd_limits_<LOCAL_RANK>: this worker's soft descriptor limit, then its agent's (the
# parent, ddprun) soft and hard limits from /proc.
{
  ulimit -Sn
  awk '/^Max open files/ { print $4; print $5 }' "/proc/$PPID/limits"
} > "$DDPRUN_TEST_OUT/fd_limits_$LOCAL_RANK.tmp"
mv "$DDPRUN_TEST_OUT/fd_limits_$LOCAL_RANK.tmp" "$DDPRUN_TEST_OUT/fd_limits_$LOCAL_RANK"
