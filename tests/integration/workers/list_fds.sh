#!/bin/sh
# Lists the descriptors a worker starts with: `ls -l /proc/self/fd` shows ls's own (inherited
# from this shell, which got them from ddprun) plus the one ls opened to read the directory.
ls -l /proc/self/fd > "$DDPRUN_TEST_OUT/fds_$LOCAL_RANK.tmp"
mv "$DDPRUN_TEST_OUT/fds_$LOCAL_RANK.tmp" "$DDPRUN_TEST_OUT/fds_$LOCAL_RANK"
