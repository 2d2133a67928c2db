#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/damage.sh -- seeded damage trials: t/damagedrv copies a pristine pool,
# damages one of its files (a byte flipped, garbage, a field set to an
# extreme value, a truncation) and runs the library, marukv-stat and
# marukv-gc against it, each in a process with a hard timeout.  A trial
# fails on a signal (SIGSEGV, SIGBUS, SIGABRT from a sanitizer), a hang,
# or a library that writes to standard error; any error code is fine.
# See t/damagedrv.c for what each trial does.
#
# Run by `make check` from the top of the build tree.  Environment:
#   DAMAGE_TRIALS   trials per file (default 60; by hand, 2000 or more)
#   DAMAGE_FIRST    first trial number (default 0)
#   DAMAGE_SEED     base seed (default 0xda3a6e00)
#   DAMAGE_FILES    which files to damage (default super,registry,data)
#   DAMAGE_TIMEOUT  seconds a process may take before it counts as a hang
#                   (default 30)
#   DAMAGE_SKIP     FILE:TRIAL,... trials to leave out: known open crashes,
#                   named one by one; nothing is skipped by default
#   DAMAGE_KEEP     set to 1 to keep a damaged copy of each failing trial
#   DAMAGE_VERBOSE  set to 1 to show every trial
# A failing trial prints the command that reruns it alone.
# Exit: 0 all passed, 1 a trial failed, 77 the driver is not built,
# 99 setup error.

set -u
top_builddir=.
drv=$top_builddir/t/damagedrv
stat=$top_builddir/utils/marukv-stat
gc=$top_builddir/utils/marukv-gc

if [ ! -x "$drv" ]; then
	echo "skip - $drv not built"
	exit 77
fi
[ -x "$stat" ] || { echo "# $stat not built: its part is left out"; stat=; }
[ -x "$gc" ] || { echo "# $gc not built: its part is left out"; gc=; }

shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/marukv-damage.XXXXXX") || exit 99
keep=
if [ "${DAMAGE_KEEP:-0}" = 1 ]; then
	keep=--keep
	echo "# damaged copies of failing trials are kept in $tmp"
else
	trap 'rm -rf "$tmp"' EXIT
fi
trap 'exit 130' HUP INT TERM
unset MARUKV_POOL MARUKV_NODE MARUKV_LOG

# Sanitizer reports end in SIGABRT, so a report is a signal like any crash.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}abort_on_error=1:detect_leaks=0"
UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}abort_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS UBSAN_OPTIONS

verbose=
[ "${DAMAGE_VERBOSE:-0}" = 1 ] && verbose=--verbose
start=$(date +%s)
# shellcheck disable=SC2086
"$drv" --dir "$tmp" --stat "$stat" --gc "$gc" \
	--files "${DAMAGE_FILES:-super,registry,data}" \
	--trials "${DAMAGE_TRIALS:-60}" --first "${DAMAGE_FIRST:-0}" \
	--seed "${DAMAGE_SEED:-0xda3a6e00}" --timeout "${DAMAGE_TIMEOUT:-30}" \
	${DAMAGE_SKIP:+--skip "$DAMAGE_SKIP"} $keep $verbose
rc=$?
echo "# damage trials: $(( $(date +%s) - start )) s"
exit $rc
