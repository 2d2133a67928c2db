#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/crash.sh -- seeded crash trials: processes on two simulated nodes
# write, delete and read a small pool while t/crashdrv SIGKILLs some of them
# at seeded moments (some parked right before a chosen call); then
# marukv-gc reclaims what the dead left and the driver checks the pool:
# no value with a wrong byte, no problem for mkv_pool_verify(MKV_VERIFY_DEEP),
# every page accounted for, every acknowledged publish still there unless
# deleted (see t/crashdrv.c).
#
# Run by `make check` from the top of the build tree, with $srcdir set by
# automake's harness.  Environment:
#   CRASH_TRIALS  number of trials (default 40)
#   CRASH_FIRST   first trial number (default 0); trial i uses seed CRASH_SEED + i
#   CRASH_SEED    base seed (default 0xc4a5e000)
#   CRASH_BUDGET  seconds; trials not started by then are skipped (default 150)
#   CRASH_VERBOSE set to 1 to show every trial's evidence
# A failing trial runs again alone with CRASH_FIRST=<trial> CRASH_TRIALS=1.
# Each trial prints "ok - ..." or "not ok - ..." (with its evidence, "# "
# lines); the last lines are the totals and "N passed, M failed".
# Exit: 0 all passed, 1 a trial failed, 77 the driver is not built,
# 99 setup error.

set -u
top_builddir=.
drv=$top_builddir/t/crashdrv
gc=$top_builddir/utils/marukv-gc
trials=${CRASH_TRIALS:-40}
first=${CRASH_FIRST:-0}
seed=${CRASH_SEED:-0xc4a5e000}
budget=${CRASH_BUDGET:-150}
verbose=${CRASH_VERBOSE:-0}
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
# show FILE...: a failed trial's evidence, indented.
show() { for f; do sed 's/^/#   /' "$f"; done; }

if [ ! -x "$drv" ]; then
	echo "skip - $drv not built"
	exit 77
fi
gcarg="--gc $gc"
if [ ! -x "$gc" ]; then
	echo "# $gc not built: the driver calls mkv_pool_reclaim itself"
	gcarg=
fi
# bound each trial from outside too (the driver has its own watchdog)
tmo=
command -v timeout >/dev/null 2>&1 && tmo="timeout -s KILL 90"

shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/marukv-crash.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
unset MARUKV_POOL MARUKV_NODE

start=$(date +%s)
kills=0
keys=0
reclaimed=0
skipped=0
phases=
i=$first
last=$((first + trials))
while [ "$i" -lt "$last" ]; do
	now=$(date +%s)
	if [ $((now - start)) -ge "$budget" ]; then
		skipped=$((last - i))
		echo "# time budget of $budget s spent: $skipped trials not run"
		break
	fi
	s=$(printf '%#x' $((seed + i)))
	out=$tmp/trial$i.out
	# shellcheck disable=SC2086
	$tmo "$drv" --seed "$s" --dir "$tmp/t$i" $gcarg >"$out" 2>&1
	rc=$?
	summary=$(sed -n 's/^summary: //p' "$out")
	stats=$(sed -n 's/^stats: //p' "$out")
	for kv in $stats; do
		k=${kv%%=*}
		v=${kv#*=}
		case $k in
		kills) kills=$((kills + v)) ;;
		keys) keys=$((keys + v)) ;;
		reclaimed) reclaimed=$((reclaimed + v)) ;;
		kill_*) phases="$phases ${k#kill_}=$v" ;;
		esac
	done
	if [ "$rc" -eq 0 ]; then
		ok "trial $i: ${summary:-no summary}"
		[ "$verbose" = 1 ] && show "$out"
	else
		not_ok "trial $i (exit $rc; rerun: CRASH_FIRST=$i CRASH_TRIALS=1): ${summary:-no summary}"
		show "$out"
	fi
	rm -rf "$tmp/t$i"
	i=$((i + 1))
done

# kills by the phase the victim had announced, summed over the trials
bykind=$(printf '%s\n' $phases | awk -F= 'NF == 2 { n[$1] += $2 }
	END { for (k in n) printf "%s=%d ", k, n[k] }')
echo "# kills by phase: $bykind"
echo "# crash trials: $((pass + fail)), kills: $kills, keys checked: $keys, pages reclaimed: $reclaimed, time: $(( $(date +%s) - start )) s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ] && exit 0
[ "$fail" -eq 0 ] && exit 77
exit 1
