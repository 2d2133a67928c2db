#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/hostcrash.sh -- the trials of t/crash.sh across emulated hosts (a
# non-coherent pool, every node a host of its own under t/hostemu.so,
# SIGKILLs and SIGSTOPs, every acknowledged byte checked); its settings
# are HOSTS_TRIALS, HOSTS_FIRST, HOSTS_SEED, HOSTS_BUDGET and
# HOSTS_VERBOSE (see t/crash.sh).  Skips (77) when the emulator is not
# built.  Run by `make check` from the top of the build tree; a long run
# by hand, 200 trials:
#   HOSTS_TRIALS=200 HOSTS_BUDGET=5400 sh t/hostcrash.sh
exec sh "$(dirname "$0")/crash.sh" --hosts
