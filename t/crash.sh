#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/crash.sh [--torture | --hosts] -- seeded crash trials: processes on
# simulated nodes write, delete and read a small pool while t/crashdrv
# SIGKILLs some of them at seeded moments (some parked right before a
# chosen call); then marukv-gc reclaims what the dead left and the driver
# checks the pool: no value with a wrong byte, no problem for
# mkv_pool_verify(MKV_VERIFY_DEEP), every page accounted for, every
# acknowledged publish still there unless deleted, no call returning a
# code its documentation does not list (see t/crashdrv.c).
#
# With --torture (t/torture.sh), the torture trials: more processes on
# three or four nodes, a pool that fills up and evicts, an evicting
# process, and SIGSTOPs as well as SIGKILLs -- of readers holding views,
# writers inside a publish, deleters and the lease holder, for less than
# the lease period, more, or more than the client timeout -- while readers
# hold views across it all and check every byte.
#
# With --hosts (t/hostcrash.sh), the trials across emulated hosts: a
# non-coherent pool, every node a host of its own under t/hostemu.so
# (LD_PRELOAD; $MKV_HOSTEMU, else t/.libs/hostemu.so), the driver, the
# reclaim and the checks on a host of their own ("x").  Even trials have
# the crash trial's shape, spread over three nodes, odd ones the torture
# trial's (three or four nodes; stops shorter than the client timeout,
# which is 2 s here); in trials 2 and 3 of every 4 the hosts' caches
# also write back and drop lines on their own (HOSTEMU_NOISE=20, seeded
# with the trial's seed).  See t/crashdrv.c.
#
# Run by `make check` from the top of the build tree.  Environment (CRASH_*
# for the crash trials, TORTURE_* for the torture trials, HOSTS_* for the
# trials across hosts):
#   *_TRIALS  number of trials (default 40 crash, 20 torture, 12 hosts)
#   *_FIRST   first trial number (default 0); trial i uses seed *_SEED + i
#   *_SEED    base seed (default 0xc4a5e000 crash, 0x7047e000 torture,
#             0x4057e000 hosts)
#   *_BUDGET  seconds; trials not started by then are skipped (default 150
#             crash, 90 torture, 100 hosts)
#   *_VERBOSE set to 1 to show every trial's evidence
#   *_JOBS    trials run at once (default 3, hosts 1)
# A long run by hand, for an hour:
#   TORTURE_TRIALS=100000 TORTURE_BUDGET=3600 sh t/torture.sh
#   HOSTS_TRIALS=100000 HOSTS_BUDGET=3600 sh t/hostcrash.sh
# A failing trial runs again alone with *_FIRST=<trial> *_TRIALS=1 (the
# line says so, and gives the driver's own command).
# Each trial prints "ok - ..." or "not ok - ..." (with its evidence, "# "
# lines); the last lines are the totals and "N passed, M failed".
# Exit: 0 all passed, 1 a trial failed, 77 the driver (--hosts: or the
# emulator) is not built, 99 setup error.

set -u
mode=crash
drvarg=
case "${1:-}" in
--torture)
	mode=torture
	drvarg=--torture
	;;
--hosts)
	mode=hosts
	;;
esac
VAR=$(echo "$mode" | tr a-z A-Z)
# setting NAME DEFAULT: $CRASH_NAME, $TORTURE_NAME or $HOSTS_NAME, else DEFAULT
setting() { eval "printf '%s' \"\${${VAR}_$1:-$2}\""; }

top_builddir=.
drv=$top_builddir/t/crashdrv
gc=$top_builddir/utils/marukv-gc
if [ "$mode" = torture ]; then
	trials=$(setting TRIALS 20)
	seed=$(setting SEED 0x7047e000)
	budget=$(setting BUDGET 90)
	limit=120
elif [ "$mode" = hosts ]; then
	trials=$(setting TRIALS 12)
	seed=$(setting SEED 0x4057e000)
	budget=$(setting BUDGET 100)
	limit=150
else
	trials=$(setting TRIALS 40)
	seed=$(setting SEED 0xc4a5e000)
	budget=$(setting BUDGET 150)
	limit=90
fi
first=$(setting FIRST 0)
verbose=$(setting VERBOSE 0)
# across hosts one at a time: the emulator's processes compute more, and
# with two or three at once beside the other tests a client now and then
# was judged dead though no trial had stopped it (the client timeout there
# is 2 s)
if [ "$mode" = hosts ]; then
	jobs=$(setting JOBS 1)
else
	jobs=$(setting JOBS 3)
fi
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $*"; }
# show FILE...: a failed trial's evidence, indented.
show() { for f; do sed 's/^/#   /' "$f"; done; }

if [ ! -x "$drv" ]; then
	echo "skip - $drv not built"
	exit 77
fi
shim=${MKV_HOSTEMU:-$top_builddir/t/.libs/hostemu.so}
if [ "$mode" = hosts ]; then
	if [ ! -f "$shim" ]; then
		echo "skip - $shim not built"
		exit 77
	fi
	shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")
fi
gcarg="--gc $gc"
if [ ! -x "$gc" ]; then
	echo "# $gc not built: the driver calls mkv_pool_reclaim itself"
	gcarg=
fi
# bound each trial from outside too (the driver has its own watchdog)
tmo=
command -v timeout >/dev/null 2>&1 && tmo="timeout -s KILL $limit"

shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/marukv-$mode.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
unset MARUKV_POOL MARUKV_NODE

# args I: trial I's seed (s); --hosts: the emulator's environment for
# it (envarg) and as a rerun gives it, for an empty directory EMU (hint),
# the trial's shape (drvarg) and noise.
args() {
	s=$(printf '%#x' $((seed + $1)))
	envarg=
	hint=
	if [ "$mode" = hosts ]; then
		# a sanitized build: its runtime is not the first library then
		rest="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
		rest="HOSTEMU_HOST=x $rest"
		[ $(($1 % 4)) -ge 2 ] && rest="$rest HOSTEMU_NOISE=20 HOSTEMU_SEED=$s"
		envarg="LD_PRELOAD=$shim HOSTEMU_DIR=$tmp/e$1 HOSTEMU_POOL=$tmp/t$1/pool $rest"
		hint="LD_PRELOAD=$shim HOSTEMU_DIR=EMU HOSTEMU_POOL=DIR/pool $rest "
		drvarg=--hosts
		[ $(($1 % 2)) -eq 1 ] && drvarg="--hosts --torture"
	fi
}
# trial I: run trial I, its output in $tmp/trialI.out, its status in
# $tmp/trialI.rc; report I: its line, and its counts into $tmp/stats.
trial() {
	args "$1"
	[ "$mode" = hosts ] && { mkdir "$tmp/e$1" || exit 99; }
	# shellcheck disable=SC2086
	$tmo env $envarg "$drv" --seed "$s" --dir "$tmp/t$1" $drvarg $gcarg >"$tmp/trial$1.out" 2>&1
	echo $? >"$tmp/trial$1.rc"
	rm -rf "$tmp/t$1" "$tmp/e$1"
}
report() {
	args "$1"
	out=$tmp/trial$1.out
	rc=$(cat "$tmp/trial$1.rc" 2>/dev/null || echo 99)
	summary=$(sed -n 's/^summary: //p' "$out")
	sed -n 's/^stats: //p' "$out" | tr ' ' '\n' >>"$tmp/stats"
	if [ "$rc" -eq 0 ]; then
		ok "trial $1: ${summary:-no summary}"
		[ "$verbose" = 1 ] && show "$out"
	else
		not_ok "trial $1 (exit $rc; rerun: ${VAR}_FIRST=$1 ${VAR}_TRIALS=1, or" \
			"${hint}t/crashdrv --seed $s --dir DIR $drvarg" \
			"--gc utils/marukv-gc):" "${summary:-no summary}"
		show "$out"
	fi
}

# The trials run $jobs at a time: each spends most of its time waiting
# (for lease periods, timeouts, the processes it stopped), not computing.
start=$(date +%s)
skipped=0
: >"$tmp/stats"
i=$first
last=$((first + trials))
while [ "$i" -lt "$last" ]; do
	now=$(date +%s)
	if [ $((now - start)) -ge "$budget" ]; then
		skipped=$((last - i))
		echo "# time budget of $budget s spent: $skipped trials not run"
		break
	fi
	j=$i
	pids=
	while [ "$j" -lt "$last" ] && [ "$j" -lt $((i + jobs)) ]; do
		trial "$j" &
		pids="$pids $!"
		j=$((j + 1))
	done
	# shellcheck disable=SC2086 # a list of pids
	wait $pids
	while [ "$i" -lt "$j" ]; do
		report "$i"
		i=$((i + 1))
	done
done

# the counts of every trial, added up by name
awk -F= -v trials=$((pass + fail)) -v secs=$(($(date +%s) - start)) -v mode="$mode" '
NF == 2 { n[$1] += $2 }
function v(k) { return n[k] + 0 }
function list(prefix, title,    k, cmd, any) {
	cmd = "sort | tr \"\\n\" \" \""
	for (k in n)
		if (index(k, prefix) == 1) {
			if (!any)
				printf "# %s: ", title
			any = 1
			fflush()
			print substr(k, length(prefix) + 1) "=" n[k] | cmd
		}
	if (any) {
		close(cmd)
		print ""
	}
}
END {
	printf "# %s trials: %d, time: %d s\n", mode, trials, secs
	printf "# kills: %d (of the lease holder: %d; parked before a call: %d, let go into it: %d)\n",
		v("kills"), v("holder_kills"), v("kills_parked"), v("kills_inside")
	printf "# stops: %d (shorter than the lease period: %d, past it: %d, past the client timeout: %d;" \
		" of the lease holder: %d; ended by SIGKILL: %d; no holder to stop or kill: %d)\n",
		v("stops"), v("stops_short"), v("stops_past_lease"), v("stops_past_timeout"),
		v("holder_stops"), v("stops_then_killed"), v("holder_missed")
	printf "# views: %d (held across kills: %d, across stops: %d, through their own stop: %d," \
		" outlived their key: %d; long holds: %d); EXPIRED: %d\n", v("views"),
		v("views_across_kills"), v("views_across_stops"), v("views_through_own_stop"),
		v("views_outlived_key"), v("long_holds"), v("expired")
	printf "# keys checked: %d (publishes acknowledged: %d, deletes: %d, evictions: %d)\n",
		v("keys"), v("publishes"), v("deletes"), v("evictions")
	printf "# pages reclaimed after the trials: %d (granted to processes when killed: %d," \
		" reclaimed by holders as logged: %d); lease taken %d times; library warnings: %d\n",
		v("reclaimed"), v("orphaned_pages"), v("logged_reclaimed_pages"), v("lease_taken"),
		v("warnings")
	if (mode == "hosts")
		printf "# emulated hosts: lines written back %d, refreshed %d, spontaneous events %d" \
			" (of the processes that closed their pool)\n", v("emu_written_back"),
			v("emu_refreshed"), v("emu_spontaneous")
	list("kill_", "kills by phase")
	list("stop_", "stops by phase")
	list("rc_", "return codes")
}' "$tmp/stats"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ] && exit 0
[ "$fail" -eq 0 ] && exit 77
exit 1
