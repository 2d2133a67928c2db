#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t/tools.sh -- the tools, the man pages and the documented examples.
#
# Run by `make check` from the top of the build tree, with $srcdir set by
# automake's harness; the compiler and sanitizer flags for building the
# examples come from the build tree's Makefile.  Each check prints
# "ok - ..." or "not ok - ..."; a check whose prerequisite is missing prints
# "skip - ..." and is not counted.  The last line is "N passed, M failed".
# Exit: 0 all passed, 1 a check failed, 77 nothing could run, 99 setup error.

set -u
top_builddir=.
top_srcdir=${srcdir:-.}
CC=$(sed -n 's/^CC = //p' "$top_builddir/Makefile")
SAN_CFLAGS=$(sed -n 's/^SAN_CFLAGS = //p' "$top_builddir/Makefile")

stat=$top_builddir/utils/marukv-stat
gc=$top_builddir/utils/marukv-gc
bench=$top_builddir/utils/marukv-bench
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; }
skip() { echo "skip - $1"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
# show FILE...: a failed check's evidence, indented.
show() { for f; do sed 's/^/#   /' "$f"; done; }

if [ ! -x "$stat" ] || [ ! -x "$gc" ] || [ ! -x "$bench" ]; then
	echo "skip - $stat, $gc or $bench not built"
	exit 77
fi

# Pools live under /dev/shm (tmpfs) when there is one, as in production.
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/marukv-tools.XXXXXX") || exit 99
# The examples create a default-sized pool (256 MiB): on disk, not in tmpfs.
disk=$(mktemp -d "${TMPDIR:-/tmp}/marukv-tools.XXXXXX") || { rm -rf "$tmp"; exit 99; }
trap 'rm -rf "$tmp" "$disk"' EXIT
# non-coherent pools' lock directories (marukv(7)): here, not in /dev/shm
export MARUKV_LOCK_DIR="$tmp"
trap 'exit 130' HUP INT TERM
pool=$tmp/pool
unset MARUKV_POOL

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")

# json_int FILE KEY: the integer value of "KEY" in a marukv-stat --json object.
json_int() { sed -n "s/^  \"$2\": \\([0-9][0-9]*\\),\\{0,1\\}\$/\\1/p" "$1"; }
# json_val FILE KEY: the raw value (string with its quotes, true...) of "KEY".
json_val() { sed -n "s/^  \"$2\": \\(.*[^,]\\),\\{0,1\\}\$/\\1/p" "$1"; }
# json_keys FILE: the top-level keys of a --json object, in order, one line.
json_keys() { sed -n 's/^  "\([a-z_]*\)": .*/\1/p' "$1" | tr '\n' ' '; }
# field FILE LABEL: the value of a "LABEL: value" line.
field() { sed -n "s/^$2: *//p" "$1"; }
# exits N COMMAND...: the last tool exited with N ($rc), and COMMAND succeeds.
exits() {
	n=$1
	shift
	[ "$rc" -eq "$n" ] && "$@"
}

# ---- marukv-bench's commands are documented and benchmarked ----------------

# Each command --help lists has its synopsis line and a section under
# DESCRIPTION and OPTIONS in marukv-bench(1), and each but demo is in the
# set make bench runs.
man_in=$top_srcdir/man/marukv-bench.1.in
run_set=$(sed -n 's/^set_commands="\(.*\)"$/\1/p' "$top_srcdir/utils/bench/run.sh")
for c in $("$bench" --help | awk '/^commands:/ { f = 1; next } f && /^  [a-z]/ { print $1 }'); do
	check "bench $c: a synopsis line and two sections in marukv-bench(1)" test \
		"$(grep -Fxc -e ".B marukv\\-bench $c" -e ".SS $c" "$man_in")" = 3
	[ "$c" = demo ] ||
		check "bench $c is in make bench's set" test -n "$(echo " $run_set " | grep -F " $c ")"
done

# ---- marukv-bench demo ------------------------------------------------------

"$bench" demo --pool "$pool" --prompts 4 --blocks 4 --block-size 65536 --readers 2 \
	>"$tmp/demo.out" 2>"$tmp/demo.err"
rc=$?
check "bench demo exits 0 (got $rc)" test "$rc" -eq 0
check "bench demo reports 0 verify errors" test "$(field "$tmp/demo.out" 'verify errors')" = 0
written=$(field "$tmp/demo.out" 'keys written')
present=$(field "$tmp/demo.out" 'keys present')
check "bench demo: keys written ($written) + present ($present) = 16" \
	test "$((${written:-0} + ${present:-0}))" -eq 16
check "bench demo: final pass hits every block" \
	test "$(field "$tmp/demo.out" 'final pass hit')" = "32 / 32"
[ "$fail" -eq 0 ] || show "$tmp/demo.out" "$tmp/demo.err"

# Same seed, same pool: every key is there already.
"$bench" demo --pool "$pool" --prompts 4 --blocks 4 --block-size 65536 --readers 2 \
	--json >"$tmp/demo2.json" 2>"$tmp/demo2.err"
rc=$?
check "bench demo --json rerun exits 0 (got $rc)" test "$rc" -eq 0
check "bench demo rerun writes nothing" test "$(json_int "$tmp/demo2.json" keys_written)" = 0
check "bench demo rerun finds 16 keys present" \
	test "$(json_int "$tmp/demo2.json" keys_present)" = 16
check "bench demo --json verify_errors is 0" \
	test "$(json_int "$tmp/demo2.json" verify_errors)" = 0

"$bench" demo --pool "$pool" --blocks 0 >"$tmp/usage.out" 2>"$tmp/usage.err"
rc=$?
check "bench demo --blocks 0 exits 2 (got $rc)" test "$rc" -eq 2
check "bench demo --blocks 0 says why on stderr" test -s "$tmp/usage.err"
"$bench" no-such-command >/dev/null 2>&1
rc=$?
check "bench unknown command exits 2 (got $rc)" test "$rc" -eq 2

# ---- marukv-bench register and takeover --------------------------------------

"$bench" register --writers 1,2 --keys 200 --repeat 1 --dir "$tmp" \
	>"$tmp/reg.out" 2>"$tmp/reg.err"
rc=$?
check "bench register exits 0 (got $rc)" test "$rc" -eq 0
check "bench register is quiet on stderr" test ! -s "$tmp/reg.err"
check "bench register has its columns" grep -Eq \
	'^writers +marukv sync +marukv async\(32\) +raw LMDB +holder.s own +sync/LMDB +async/LMDB +sync/holder$' \
	"$tmp/reg.out"
check "bench register has its CPU table" grep -Eq \
	'^writers +marukv sync +marukv async\(32\) +raw LMDB +holder.s own *$' "$tmp/reg.out"
check "bench register has rows for 1 and 2 writers" \
	test "$(sed -n 's/^ *\([12]\)  *[0-9][0-9]* (.*/\1/p' "$tmp/reg.out" | tr '\n' ' ')" = "1 2 "
[ "$rc" -eq 0 ] && [ ! -s "$tmp/reg.err" ] || show "$tmp/reg.out" "$tmp/reg.err"
check "bench register left no scratch directory" \
	test -z "$(find "$tmp" -maxdepth 1 -name 'marukv-bench.*')"

"$bench" register --writers 1 --keys 200 --repeat 1 --dir "$tmp" --json \
	>"$tmp/reg.json" 2>"$tmp/regj.err"
rc=$?
check "bench register --json exits 0 (got $rc)" test "$rc" -eq 0
for k in command dir keys value_size window repeat seed rows writers marukv_sync \
	marukv_async lmdb marukv_holder cpu_us ratio_sync_lmdb ratio_async_lmdb \
	ratio_sync_holder; do
	check "bench register --json has \"$k\"" grep -q "\"$k\": " "$tmp/reg.json"
done
check "bench register --json medians are integers" grep -Eq \
	'"marukv_sync": \{ "median": [0-9]+, "min": [0-9]+, "max": [0-9]+, "cpu_us": [0-9.]+ \}' \
	"$tmp/reg.json"

"$bench" takeover --trials 2 --period-ms 200 --dir "$tmp" >"$tmp/to.out" 2>"$tmp/to.err"
rc=$?
check "bench takeover exits 0 (got $rc)" test "$rc" -eq 0
check "bench takeover is quiet on stderr" test ! -s "$tmp/to.err"
check "bench takeover has its columns" grep -Eq \
	'^client +memory +trials +median +min +p90 +max +failed +long +nc/c$' "$tmp/to.out"
check "bench takeover has a same-node and an other-node coherent row of 2 trials, 0 failed" \
	test "$(sed -n 's/^\([a-z-]*\)  *coherent  *2  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]*  *0  *0  *-$/\1/p' \
		"$tmp/to.out" | tr '\n' ' ')" = "same-node other-node "
[ "$rc" -eq 0 ] && [ ! -s "$tmp/to.err" ] || show "$tmp/to.out" "$tmp/to.err"

"$bench" takeover --trials 2 --period-ms 200 --same-node --dir "$tmp" --json \
	>"$tmp/to.json" 2>"$tmp/toj.err"
rc=$?
check "bench takeover --same-node --json exits 0 (got $rc)" test "$rc" -eq 0
check "bench takeover --json has one same-node row with the documented keys" grep -Eqx \
	'    \{ "client": "same-node", "coherence": "coherent", "median_ns": [0-9]+, "min_ns": [0-9]+, "p90_ns": [0-9]+, "max_ns": [0-9]+, "failed_publishes": 0, "long_trials": 0, "ratio_noncoherent": null \}' \
	"$tmp/to.json"

# The other-host client judges the holder by heartbeat, which stands still
# for a lease period after the kill less the quarter period it may have
# beaten before: half a lease period is a floor that load cannot break.
"$bench" takeover --trials 1 --period-ms 200 --client-timeout-ms 300 --both --other-host \
	--dir "$tmp" --json >"$tmp/toh.json" 2>"$tmp/toh.err"
rc=$?
check "bench takeover --both --other-host exits 0 (got $rc)" test "$rc" -eq 0
check "bench takeover --both --other-host is quiet on stderr" test ! -s "$tmp/toh.err"
check "bench takeover --json has the client timeout" grep -q '"client_timeout_ms": 300,' \
	"$tmp/toh.json"
check "bench takeover --both has an other-host row per mode, the ratio on the non-coherent one" \
	test "$(sed -n 's/^    { "client": "other-host", "coherence": "\([a-z-]*\)", .*"failed_publishes": 0, "long_trials": [01], "ratio_noncoherent": \([a-z]*\)[0-9.]* }.*/\1:\2/p' \
		"$tmp/toh.json" | tr '\n' ' ')" = "coherent:null non-coherent: "
check "bench takeover other-host takeovers take at least half a lease period" \
	test "$(sed -n 's/.*"client": "other-host".*"min_ns": \([0-9]*\),.*/\1/p' "$tmp/toh.json" |
		awk '$1 >= 100000000 { n++ } END { print n + 0 }')" -eq 2
check "bench takeover long_trials counts the trials of the client timeout (300 ms) or more" \
	test "$(sed -n 's/.*"client": "other-host".*"min_ns": \([0-9]*\),.*"long_trials": \([0-9]*\),.*/\1 \2/p' \
		"$tmp/toh.json" | awk '($1 >= 300000000) == $2 { n++ } END { print n + 0 }')" -eq 2
[ "$rc" -eq 0 ] && [ ! -s "$tmp/toh.err" ] || show "$tmp/toh.json" "$tmp/toh.err"
"$bench" takeover --client-timeout-ms 50 >/dev/null 2>&1
rc=$?
check "bench takeover --client-timeout-ms 50 exits 2 (got $rc)" test "$rc" -eq 2
"$bench" takeover --period-ms 10 >/dev/null 2>&1
rc=$?
check "bench takeover --period-ms 10 exits 2 (got $rc)" test "$rc" -eq 2

# ---- marukv-bench hitrate and evict ----------------------------------------

# hit_rates FILE: the LRU and marukv hit rates of hitrate --json's rows, one a line.
hit_rates() {
	sed -n 's/^    { "workload": .*"lru_hit_rate": \([^,]*\), "marukv_hit_rate": \([^,]*\),.*/\1\
\2/p' "$1"
}
"$bench" hitrate --sessions 8 --requests 60 --capacity 10,50 --dir "$tmp" --json \
	>"$tmp/hr.json" 2>"$tmp/hr.err"
rc=$?
check "bench hitrate --json exits 0 (got $rc)" test "$rc" -eq 0
check "bench hitrate is quiet on stderr" test ! -s "$tmp/hr.err"
if command -v python3 >/dev/null 2>&1; then
	check "bench hitrate --json parses" python3 -c \
		'import json, sys; json.load(open(sys.argv[1]))' "$tmp/hr.json"
else
	skip "no python3: bench hitrate --json parse"
fi
check "bench hitrate --json: 3 workloads x 2 capacities, each with 2 hit rates" \
	test "$(hit_rates "$tmp/hr.json" | wc -l)" -eq 12
check "bench hitrate --json: hit rates between 0 and 1" test -z "$(hit_rates "$tmp/hr.json" |
	awk '!/^[0-9]+\.[0-9]+$/ || $1 > 1')"
check "bench hitrate --json: no allocation ran out of pages" \
	test "$(grep -c '"nospc": 0,' "$tmp/hr.json")" -eq 6
[ "$rc" -eq 0 ] && [ ! -s "$tmp/hr.err" ] || show "$tmp/hr.json" "$tmp/hr.err"
check "bench hitrate left no scratch directory" \
	test -z "$(find "$tmp" -maxdepth 1 -name 'marukv-bench.*')"
"$bench" hitrate --workload nosuch >/dev/null 2>&1
rc=$?
check "bench hitrate --workload nosuch exits 2 (got $rc)" test "$rc" -eq 2
for wm in 5/1 91/91 1/ 1/1/1 x -1/1; do
	"$bench" hitrate --watermarks "$wm" --dir "$tmp" >/dev/null 2>"$tmp/hr.err"
	rc=$?
	check "bench hitrate --watermarks $wm exits 2 (got $rc)" test "$rc" -eq 2
	check "bench hitrate --watermarks $wm says why" \
		grep -q "bad value for --watermarks: $wm" "$tmp/hr.err"
done
# Eviction off: the pool fills and keeps its first blocks; the allocations
# refused after are counted, the first reported, and occupancy is sampled.
"$bench" hitrate --workload chat --sessions 8 --requests 60 --capacity 10 \
	--watermarks 0/0 --dir "$tmp" --json >"$tmp/hr.json" 2>"$tmp/hr.err"
rc=$?
check "bench hitrate --watermarks 0/0 exits 0 (got $rc)" test "$rc" -eq 0
check "bench hitrate --watermarks 0/0: allocations refused once full" \
	grep -q '"nospc": [1-9]' "$tmp/hr.json"
check "bench hitrate --watermarks 0/0: the first refusal is reported, once" \
	test "$(grep -c 'mkv_alloc: ' "$tmp/hr.err")" -eq 1
check "bench hitrate --watermarks 0/0: occupancy sampled once full" \
	grep -q '"occupancy": 0\.[1-9]' "$tmp/hr.json"
check "bench hitrate --watermarks 0/0: nothing evicted" grep -q '"evictions": 0,' "$tmp/hr.json"

"$bench" evict --pages 2048 --hot 64 --reads 100000 --repeat 1 --dir "$tmp" --json \
	>"$tmp/ev.json" 2>"$tmp/ev.err"
rc=$?
check "bench evict --json exits 0 (got $rc)" test "$rc" -eq 0
check "bench evict is quiet on stderr" test ! -s "$tmp/ev.err"
check "bench evict --json has the idle, writing and evicting phases" test "$(sed -n \
	's/^    { "phase": "\([a-z]*\)", "median_ns": [0-9]*, "p99_ns": [0-9]*, .*/\1/p' \
	"$tmp/ev.json" | tr '\n' ' ')" = "idle writing evicting "
check "bench evict: the writing phase evicts nothing" \
	grep -q '"phase": "writing", .*"evictions_per_s": 0,' "$tmp/ev.json"
check "bench evict: the evicting phase evicts" \
	grep -q '"phase": "evicting", .*"evictions_per_s": [1-9]' "$tmp/ev.json"
check "bench evict: mkv_pool_evict evicted keys" \
	test "$(json_int "$tmp/ev.json" forced_evict_keys)" -gt 0
[ "$rc" -eq 0 ] && [ ! -s "$tmp/ev.err" ] || show "$tmp/ev.json" "$tmp/ev.err"

# ---- marukv-bench hash ------------------------------------------------------

"$bench" hash --sizes 1k,64k --repeat 1 --json >"$tmp/hs.json" 2>"$tmp/hs.err"
rc=$?
check "bench hash --json exits 0 (got $rc), quiet on stderr" test "$rc" -eq 0 -a ! -s "$tmp/hs.err"
check "bench hash --json has the documented keys, in order" test "$(json_keys "$tmp/hs.json")" \
	= "command repeat rows "
if command -v python3 >/dev/null 2>&1; then
	check "bench hash --json: a row per size, every figure positive" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [r["size"] for r in o["rows"]] == [1024, 65536], o
for r in o["rows"]:
    for k in ("memcpy_gb_per_s", "xxh3_gb_per_s", "blake3_gb_per_s", "ratio_xxh3_memcpy",
              "ratio_blake3_memcpy"):
        assert r[k] > 0, (k, r)' "$tmp/hs.json" || show "$tmp/hs.json"
fi

# ---- marukv-bench remote ----------------------------------------------------

if command -v redis-server >/dev/null 2>&1; then
	"$bench" remote --sizes 4k,64k --values 2 --repeat 1 --dir "$tmp" --json \
		>"$tmp/rm.json" 2>"$tmp/rm.err"
	rc=$?
	check "bench remote --json exits 0 (got $rc), quiet on stderr" \
		test "$rc" -eq 0 -a ! -s "$tmp/rm.err"
	check "bench remote --json has the documented keys, in order" \
		test "$(json_keys "$tmp/rm.json")" = "command values repeat rows "
	if command -v python3 >/dev/null 2>&1; then
		check "bench remote --json: a row per size, every figure positive" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [r["size"] for r in o["rows"]] == [4096, 65536], o
for r in o["rows"]:
    for m in ("spill", "fetch", "redis_set", "redis_get"):
        assert r[m + "_us"] > 0 and r[m + "_gb_per_s"] > 0, (m, r)
    assert r["ratio_spill_redis_set"] > 0 and r["ratio_fetch_redis_get"] > 0, r' \
			"$tmp/rm.json" || show "$tmp/rm.json" "$tmp/rm.err"
	fi
else
	echo "skip - bench remote: no redis-server"
fi

# ---- marukv-bench flush -----------------------------------------------------

"$bench" flush --sizes 4k --repeat 1 --dir "$tmp" --json >"$tmp/fl.json" 2>"$tmp/fl.err"
rc=$?
check "bench flush --json exits 0 (got $rc)" test "$rc" -eq 0
check "bench flush is quiet on stderr" test ! -s "$tmp/fl.err"
check "bench flush --json has the documented keys, in order" test "$(json_keys "$tmp/fl.json")" \
	= "command dir repeat line_size clock_ns cpu flush_rows read_rows "
if command -v python3 >/dev/null 2>&1; then
	# On x86-64: a flush row per state, a read row, every figure there
	# unless the CPU lacks its instruction; elsewhere no rows.
	check "bench flush --json parses, with its rows and figures" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
cpu = o["cpu"]
assert sorted(cpu) == ["clflush", "clflushopt", "clwb"], cpu
if sys.argv[2] != "x86_64":
    assert o["flush_rows"] == [] and o["read_rows"] == [], o
    sys.exit(0)
need = {"clflush_mfence": "clflush", "clflushopt_sfence": "clflushopt",
        "clflushopt_mfence": "clflushopt", "clwb_sfence": "clwb",
        "read": None, "memcpy": None, "clflush_read": "clflush",
        "clflushopt_read": "clflushopt"}
def fig(row, k, keys):
    v = row[k]
    if need[k] and not cpu[need[k]]:
        assert v is None, (k, v)
    else:
        assert sorted(v) == sorted(keys), (k, v)
        assert all(isinstance(v[x], (int, float)) and v[x] >= 0 for x in keys), v
fr, rr = o["flush_rows"], o["read_rows"]
assert [(r["size"], r["state"]) for r in fr] == \
    [(4096, "dirty"), (4096, "clean"), (4096, "uncached")], fr
for r in fr:
    assert list(r)[:3] == ["size", "passes", "state"], r
    for k in ("clflush_mfence", "clflushopt_sfence", "clflushopt_mfence", "clwb_sfence"):
        fig(r, k, ["ns_per_line", "ns_per_page"])
    assert "ratio_clflushopt_clflush" in r and "ratio_clflushopt_sfence_clflush" in r, r
assert [r["size"] for r in rr] == [4096], rr
for k in ("read", "memcpy", "clflush_read", "clflushopt_read"):
    fig(rr[0], k, ["ns_per_line", "ns_per_page", "bytes_per_s"])
assert "ratio_clflush_read" in rr[0] and "ratio_clflushopt_read" in rr[0], rr
' "$tmp/fl.json" "$(uname -m)"
else
	skip "no python3: bench flush --json parse"
fi
[ "$rc" -eq 0 ] && [ ! -s "$tmp/fl.err" ] || show "$tmp/fl.json" "$tmp/fl.err"
"$bench" flush --sizes 100 >/dev/null 2>"$tmp/fl-usage.err"
rc=$?
check "bench flush --sizes 100 (not a multiple of 64) exits 2 (got $rc)" test "$rc" -eq 2
check "bench flush --sizes 100 says why" test -s "$tmp/fl-usage.err"
check "bench flush left no scratch directory" \
	test -z "$(find "$tmp" -maxdepth 1 -name 'marukv-bench.*')"

# ---- marukv-bench coherence -------------------------------------------------

"$bench" coherence --keys 64 --ops 40 --repeat 1 --dir "$tmp" --json >"$tmp/co.json" \
	2>"$tmp/co.err"
rc=$?
check "bench coherence --json exits 0 (got $rc)" test "$rc" -eq 0
check "bench coherence is quiet on stderr" test ! -s "$tmp/co.err"
check "bench coherence --json has the documented keys, in order" test \
	"$(json_keys "$tmp/co.json")" = \
	"command dir keys big_values ops chain repeat seed clock_ns rows holder_cpu_per_client_put "
check "bench coherence --json has a row per measurement, in order" test "$(sed -n \
	's/^    { "op": "\([a-z_]*\)", "value_size": \([0-9]*\), "calls": \([0-9]*\),.*/\1:\2:\3/p' \
	"$tmp/co.json" | tr '\n' ' ')" = "exists:4096:40 get:4096:40 get:1048576:40 \
get:33554432:16 prefix_len:4096:2 put_holder:4096:4 put_client:4096:4 get_new:4096:4 "
co_lat='\{ "median_ns": [0-9]+, "p99_ns": [0-9]+ \}'
check "bench coherence --json rows have both modes, a ratio, a rate for gets only" test "$(grep -Ec \
	"^    \\{ \"op\": \"(get\", .*\"extra_bytes_per_s\": ([0-9]+|null)|[a-z_]+\", .*\"extra_bytes_per_s\": null) \\},?\$" \
	"$tmp/co.json") $(grep -Ec "\"coherent\": $co_lat, \"noncoherent\": $co_lat, \"ratio_noncoherent\": [0-9.]+," \
	"$tmp/co.json")" = "8 8"
check "bench coherence --json has the holder's CPU per client put" grep -Eqx \
	'  "holder_cpu_per_client_put": \{ "coherent_ns": [0-9]+, "noncoherent_ns": [0-9]+, "ratio_noncoherent": [0-9.]+ \}' \
	"$tmp/co.json"
[ "$rc" -eq 0 ] && [ ! -s "$tmp/co.err" ] || show "$tmp/co.json" "$tmp/co.err"
"$bench" coherence --keys 10 >/dev/null 2>"$tmp/co-usage.err"
rc=$?
check "bench coherence --keys 10 (fewer than a chain) exits 2 (got $rc)" test "$rc" -eq 2
check "bench coherence left no scratch directory" \
	test -z "$(find "$tmp" -maxdepth 1 -name 'marukv-bench.*')"

# ---- marukv-bench lookup, getsize and put -------------------------------------

# Their Redis peer needs redis-server; without it they run without the peer.
noredis=
if ! command -v redis-server >/dev/null 2>&1; then
	noredis=--no-redis
	skip "redis-server not installed (Debian: redis-server): the bench's Redis peer"
fi
# bench_json NAME CMD ARGS...: run a bench command with --json in $tmp.
bench_json() {
	name=$1
	shift
	"$bench" "$@" --dir "$tmp" --json ${noredis:+"$noredis"} \
		>"$tmp/$name.json" 2>"$tmp/$name.err"
	rc=$?
	check "bench $1 --json exits 0 (got $rc)" test "$rc" -eq 0
	check "bench $1 is quiet on stderr" test ! -s "$tmp/$name.err"
	if command -v python3 >/dev/null 2>&1; then
		check "bench $1 --json parses" python3 -c \
			'import json, sys; json.load(open(sys.argv[1]))' "$tmp/$name.json"
	fi
	[ "$rc" -eq 0 ] && [ ! -s "$tmp/$name.err" ] || show "$tmp/$name.json" "$tmp/$name.err"
}
# row_num FILE KEY: the number "KEY" has in the first row of a --json object.
row_num() { sed -n "s/^    {.* \"$2\": \\([0-9.]*\\)[, ].*/\\1/p" "$1" | head -n 1; }
lat='\{ "median_ns": [0-9]+, "p99_ns": [0-9]+ \}'
plat='\{ "median_ns": [0-9]+, "p99_ns": [0-9]+, "per_key_ns": [0-9]+ \}'
if [ -n "$noredis" ]; then redis_lat=null; else redis_lat=$lat; fi

bench_json lk lookup --keys 256 --readers 1,2 --ops 200 --chain 16 --prefix-ops 20 --repeat 2
check "bench lookup --json has the documented keys, in order" test "$(json_keys "$tmp/lk.json")" \
	= "command dir value_size ops chain prefix_ops repeat seed redis clock_ns rows pools "
check "bench lookup --json has a row for 1 and for 2 readers, each with every figure" test \
	"$(grep -Ec "^    \\{ \"keys\": 256, \"readers\": [12], \"marukv_exists\": $lat, \"marukv_get\": $lat, \"lmdb_exists\": $lat, \"lmdb_get\": $lat, \"redis_get\": $redis_lat, \"marukv_prefix\": $plat, \"lmdb_prefix\": $plat, \"ratio_exists_lmdb\": [0-9.]+, \"ratio_get_lmdb\": [0-9.]+, \"ratio_redis_get\": ([0-9.]+|null), \"ratio_prefix_lmdb\": [0-9.]+ \\},?\$" \
		"$tmp/lk.json")" = 2
lk_pool=$(grep -Eo '^    \{ "keys": 256, "fill_s": [0-9.]+, "registry_bytes": [0-9]+, "registry_bytes_per_key": [0-9.]+, "lmdb_bytes": [0-9]+, "lmdb_bytes_per_key": [0-9.]+, "open_ns": [0-9]+ \}$' \
	"$tmp/lk.json")
check "bench lookup --json has the pool's fill, registry and open figures" test -n "$lk_pool"
# A registry holds at least the keys, and no more than a few LMDB pages per key here.
lk_perkey=$(printf '%s\n' "$lk_pool" | sed 's/.*"registry_bytes_per_key": \([0-9]*\).*/\1/')
check "bench lookup's registry bytes per key are sane (got ${lk_perkey:-none})" \
	test "${lk_perkey:-0}" -ge 16 -a "${lk_perkey:-0}" -le 65536
check "bench lookup's open time is not 0" test -z "$(printf '%s\n' "$lk_pool" | grep '"open_ns": 0 ')"
"$bench" lookup --keys 256 --readers 1 --ops 100 --prefix-ops 10 --repeat 1 --dir "$tmp" \
	${noredis:+"$noredis"} >"$tmp/lk.txt" 2>&1
check "bench lookup (text) has its three tables" test "$(grep -Ec \
	'^ *keys +(readers +marukv exists +marukv get +LMDB exists +LMDB get +Redis GET +exists/LMDB +get/LMDB +Redis/get|readers +marukv prefix +per key +LMDB prefix +per key +prefix/LMDB|fill s +fill k/s +registry B +B/key +LMDB peer B +B/key +open us)$' \
	"$tmp/lk.txt")" = 3
check "bench lookup (text) has a pool row" grep -Eq \
	'^ +256 +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9]+$' "$tmp/lk.txt"
"$bench" lookup --keys 8 --chain 16 >/dev/null 2>"$tmp/lk-usage.err"
rc=$?
check "bench lookup with a pool shorter than a chain exits 2 (got $rc)" test "$rc" -eq 2
check "bench lookup with a pool shorter than a chain says why" test -s "$tmp/lk-usage.err"

bench_json gs getsize --sizes 4k,1m --values 2 --ops 100 --repeat 2
check "bench getsize --json has the documented keys, in order" test "$(json_keys "$tmp/gs.json")" \
	= "command dir values ops repeat seed redis clock_ns rows "
gets='\{ "median_ns": [0-9]+, "p99_ns": [0-9]+, "gets": 100 \}'
if [ -n "$noredis" ]; then redis_gets=null; else redis_gets=$gets; fi
check "bench getsize --json has a row per size, the first at ratio 1" test "$(grep -Ec \
	"^    \\{ \"value_size\": (4096|1048576), \"marukv_get\": $gets, \"redis_get\": $redis_gets, \"ratio_first\": [0-9.]+, \"ratio_redis_get\": ([0-9.]+|null) \\},?\$" \
	"$tmp/gs.json") $(row_num "$tmp/gs.json" ratio_first)" = "2 1.0000"

bench_json pt put --sizes 4k,1m --bytes 2m --max-values 64 --repeat 1
check "bench put --json has the documented keys, in order" test "$(json_keys "$tmp/pt.json")" \
	= "command dir bytes max_values repeat seed redis rows "
rate='\{ "bytes_per_s": [0-9]+, "ops_per_s": [0-9]+ \}'
if [ -n "$noredis" ]; then redis_rate=null; else redis_rate=$rate; fi
check "bench put --json has a holder, a client and a nosum row per size (64 and 2 values)" test "$(grep -Ec \
	"^    \\{ \"value_size\": (4096, \"writer\": \"(holder|client|nosum)\", \"values\": 64|1048576, \"writer\": \"(holder|client|nosum)\", \"values\": 2), \"memcpy\": $rate, \"nt_copy\": $rate, \"mkv_put\": $rate, \"alloc_publish\": $rate, \"redis_set\": $redis_rate, \"ratio_put_memcpy\": [0-9.]+, \"ratio_alloc_memcpy\": [0-9.]+ \\},?\$" \
	"$tmp/pt.json")" = 6
"$bench" put --sizes 0 >/dev/null 2>"$tmp/pt-usage.err"
rc=$?
check "bench put --sizes 0 exits 2 (got $rc)" test "$rc" -eq 2
check "bench lookup, getsize and put left no scratch directory" \
	test -z "$(find "$tmp" -maxdepth 1 -name 'marukv-bench.*')"

# ---- marukv-stat --------------------------------------------------------------

"$stat" --json "$pool" >"$tmp/stat.json" 2>"$tmp/stat.err"
rc=$?
check "stat --json exits 0 (got $rc)" test "$rc" -eq 0
keys=$(json_keys "$tmp/stat.json")
expected="path uuid format_version page_size pages_total pages_used pages_free \
pages_quarantined pages_granted entries bytes_stored registry_size registry_used \
clients max_clients lease_generation lease_holder_pid lease_period_ms \
lease_heartbeat_age_ms requests_pending lease_holder_node backing dax_device dax_align \
hits misses evictions client_timeout_ms low_watermark high_watermark client_list \
max_nodes nodes mode gid coherence remote_servers remote_spills remote_spill_bytes \
remote_drops remote_spill_errors remote_fetches remote_fetch_hits remote_fetch_misses \
remote_fetch_errors "
check "stat --json has the documented keys, in order" test "$keys" = "$expected"
[ "$keys" = "$expected" ] || { echo "#   got: $keys"; show "$tmp/stat.json" "$tmp/stat.err"; }
check "stat --json is one object" test "$(sed -n '1p;$p' "$tmp/stat.json" | tr -d '\n')" = "{}"
check "stat --json path is the pool" grep -qx "  \"path\": \"$pool\"," "$tmp/stat.json"
check "stat --json uuid is 36 characters" grep -Eqx \
	'  "uuid": "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",' "$tmp/stat.json"
entries=$(json_int "$tmp/stat.json" entries)
check "stat entries ($entries) = keys the demo wrote ($written)" test "$entries" = "$written"
check "stat page_size is the default 65536" test "$(json_int "$tmp/stat.json" page_size)" = 65536
check "stat clients is 1 (itself)" test "$(json_int "$tmp/stat.json" clients)" = 1
check "stat client_timeout_ms is the default 10000" \
	test "$(json_int "$tmp/stat.json" client_timeout_ms)" = 10000
check "stat hits > 0 after the demo's final pass" \
	test "$(json_int "$tmp/stat.json" hits)" -gt 0
check "stat evictions is 0" test "$(json_int "$tmp/stat.json" evictions)" = 0
backing=$(json_val "$tmp/stat.json" backing)
case $backing in
'"tmpfs"'|'"fsdax"'|'"file"') ok "stat backing is a file backing ($backing)" ;;
*) not_ok "stat backing is a file backing (got $backing)" ;;
esac
if [ "$(stat -f -c %T "$tmp" 2>/dev/null)" = tmpfs ]; then
	check "stat backing of a pool on tmpfs is \"tmpfs\"" test "$backing" = '"tmpfs"'
fi
check "stat dax_device is \"\" and dax_align 0 off devdax" \
	test "$(json_val "$tmp/stat.json" dax_device) $(json_int "$tmp/stat.json" dax_align)" = '"" 0'
# One client, marukv-stat itself: read-only, alive, not the holder.
check "stat client_list is an array of one object: marukv-stat itself" grep -Eqx \
	'    \{ "slot": [0-9]+, "node": "[A-Za-z0-9._-]+", "pid": [1-9][0-9]*, "alive": true, "rdonly": true, "holder": false, "pin": [0-9]+, "pages_granted": 0, "heartbeat_age_ms": -?[0-9]+ \}' \
	"$tmp/stat.json"
check "stat client_list has one element" \
	test "$(sed -n '/^  "client_list": \[$/,/^  \]$/p' "$tmp/stat.json" | grep -c '^    {')" = 1

if command -v mdb_stat >/dev/null 2>&1; then
	# keys live in the main database, beside the names of the 5 other tables
	mdb=$(mdb_stat -n "$pool/registry.mdb" 2>&1 | sed -n 's/^ *Entries: //p')
	check "stat entries ($entries) = mdb_stat main entries less 5 ($mdb)" \
		test "$entries" -eq "$((mdb - 5))"
else
	skip "mdb_stat not installed (Debian: lmdb-utils): registry cross-check"
fi

"$stat" "$pool" >"$tmp/stat.txt" 2>"$tmp/stat.err"
rc=$?
check "stat (human) exits 0 (got $rc)" test "$rc" -eq 0
check "stat (human) has an entries line" test "$(field "$tmp/stat.txt" entries)" = "$entries"
check "stat (human) prints raw sizes" test "$(field "$tmp/stat.txt" 'page size')" = 65536
"$stat" -h "$pool" >"$tmp/stath.txt" 2>&1
check "stat -h prints KiB" test "$(field "$tmp/stath.txt" 'page size')" = "64.0 KiB"
check "stat (human) prints the backing" test -n "$(field "$tmp/stat.txt" backing)"
check "stat (human) prints the coherence" test "$(field "$tmp/stat.txt" coherence)" = coherent
check "stat --json coherence of a default pool is \"coherent\"" \
	test "$(json_val "$tmp/stat.json" coherence)" = '"coherent"'
check "stat (human) prints the hits" test -n "$(field "$tmp/stat.txt" hits)"
# The node table and the permissions: integers in JSON, the mode in octal in
# the text; what the values must be once the library fills them in.
for k in max_nodes nodes mode gid; do
	check "stat --json $k is an integer" test -n "$(json_int "$tmp/stat.json" "$k")"
done
mode=$(json_int "$tmp/stat.json" mode)
check "stat (human) prints the mode in octal (JSON $mode)" \
	test "$(field "$tmp/stat.txt" mode)" = "$(printf %04o "${mode:-0}")"
human_nodes="$(field "$tmp/stat.txt" 'max nodes') $(field "$tmp/stat.txt" nodes) $(field "$tmp/stat.txt" gid)"
check "stat (human) prints max nodes, nodes and gid ($human_nodes) as in the JSON" \
	test "$human_nodes" = "$(json_int "$tmp/stat.json" max_nodes) $(json_int "$tmp/stat.json" nodes) $(json_int "$tmp/stat.json" gid)" \
	-a -n "$(echo "$human_nodes" | grep -Ex '[0-9]+ [0-9]+ [0-9]+')"
maxn=$(json_int "$tmp/stat.json" max_nodes)
nodes=$(json_int "$tmp/stat.json" nodes)
gid=$(json_int "$tmp/stat.json" gid)
if [ "$maxn" = 0 ]; then
	skip "the library does not report the node table and mode yet (max_nodes 0)"
else
	check "stat: 1 <= nodes ($nodes) <= max_nodes ($maxn)" \
		test "${nodes:-0}" -ge 1 -a "${nodes:-0}" -le "${maxn:-0}"
	check "stat: mode 0600 (384), gid 0 for a pool without a group (got $mode, $gid)" \
		test "$mode $gid" = "384 0"
fi
check "stat (human) has a clients table with one row" test "$(sed -n \
	'/^ *slot  *node  *pid  *alive  *rdonly  *holder  *pin  *pages granted  *heartbeat age ms$/,$p' \
	"$tmp/stat.txt" | grep -Ec '^ *[0-9]+ +[^ ]+ +[0-9]+ +yes +yes +no ')" = 1

MARUKV_POOL=$pool "$stat" --json >"$tmp/env.json" 2>"$tmp/env.err"
rc=$?
check "stat honours \$MARUKV_POOL (exit $rc)" grep -qx "  \"path\": \"$pool\"," "$tmp/env.json"

"$stat" "$tmp/missing" >"$tmp/missing.out" 2>"$tmp/missing.err"
rc=$?
check "stat on a missing pool exits 2 (got $rc)" test "$rc" -eq 2
check "stat on a missing pool prints nothing on stdout" test ! -s "$tmp/missing.out"
check "stat on a missing pool says 'marukv-stat: POOL: ...' on stderr" \
	grep -q "^marukv-stat: $tmp/missing: ." "$tmp/missing.err"
check "stat on a missing pool does not create it" test ! -e "$tmp/missing"

"$stat" "$pool" extra >/dev/null 2>&1
rc=$?
check "stat with two pools exits 2 (got $rc)" test "$rc" -eq 2
"$stat" --no-such-option >/dev/null 2>&1
rc=$?
check "stat with a bad option exits 2 (got $rc)" test "$rc" -eq 2
# An empty POOL is a usage error, not the default pool (here $MARUKV_POOL's).
MARUKV_POOL=$pool "$stat" --json '' >"$tmp/empty.out" 2>"$tmp/empty.err"
rc=$?
check "stat --json '' is a usage error: exit 2 (got $rc), 'the pool argument is empty' and the usage on stderr, nothing on stdout" \
	test "$rc $(sed -n '1p;2s/ .*//p' "$tmp/empty.err" | tr '\n' '|')$(wc -c <"$tmp/empty.out")" = \
	"2 marukv-stat: the pool argument is empty|usage:|0"
if [ -w /dev/full ]; then
	"$stat" --json "$pool" >/dev/full 2>"$tmp/full.err"
	rc=$?
	check "stat to a full stdout exits 2 (got $rc)" test "$rc" -eq 2
	check "stat to a full stdout says so on stderr" test -s "$tmp/full.err"
else
	skip "no /dev/full: stdout write error"
fi

check "stat -V prints 'marukv-stat $version'" test "$("$stat" -V)" = "marukv-stat $version"
check "stat --version prints the version" test "$("$stat" --version)" = "marukv-stat $version"
check "bench -V prints 'marukv-bench $version'" test "$("$bench" -V)" = "marukv-bench $version"
check "stat --help exits 0" "$stat" --help >/dev/null

# ---- marukv-gc ------------------------------------------------------------------

# run_gc NAME ARGS...: run marukv-gc, output in $tmp/gc-NAME.{out,err}, status in $rc.
run_gc() {
	n=$1
	shift
	"$gc" "$@" >"$tmp/gc-$n.out" 2>"$tmp/gc-$n.err"
	rc=$?
}
# quiet NAME: nothing on stderr (stderr is not a terminal: no progress line).
quiet() { test ! -s "$tmp/gc-$1.err"; }

run_gc verify verify "$pool"
check "gc verify exits 0 (got $rc)" test "$rc" -eq 0
check "gc verify is quiet on stderr" quiet verify
check "gc verify: problems: 0" test "$(field "$tmp/gc-verify.out" problems)" = 0
check "gc verify: entries ($entries)" test "$(field "$tmp/gc-verify.out" entries)" = "$entries"
check "gc verify: pages used: $entries (one page per block)" \
	test "$(field "$tmp/gc-verify.out" 'pages used')" = "$entries"
[ "$rc" -eq 0 ] || show "$tmp/gc-verify.out" "$tmp/gc-verify.err"

run_gc verifyj --json verify "$pool"
check "gc --json verify exits 0 (got $rc)" test "$rc" -eq 0
keys=$(json_keys "$tmp/gc-verifyj.out")
expected="command path deep entries pages_used pages_quarantined pages_leaked \
checksums_checked checksums_bad problems first_problem "
check "gc --json verify has the documented keys, in order" test "$keys" = "$expected"
[ "$keys" = "$expected" ] || { echo "#   got: $keys"; show "$tmp/gc-verifyj.out"; }
check "gc --json verify is one object" \
	test "$(sed -n '1p;$p' "$tmp/gc-verifyj.out" | tr -d '\n')" = "{}"
check "gc --json verify: command, path, deep" test \
	"$(json_val "$tmp/gc-verifyj.out" command) $(json_val "$tmp/gc-verifyj.out" path) $(json_val "$tmp/gc-verifyj.out" deep)" \
	= "\"verify\" \"$pool\" false"
check "gc --json verify: problems 0, first_problem \"\"" test \
	"$(json_int "$tmp/gc-verifyj.out" problems) $(json_val "$tmp/gc-verifyj.out" first_problem)" = '0 ""'
check "gc --json verify: no checksums checked without --deep" \
	test "$(json_int "$tmp/gc-verifyj.out" checksums_checked)" = 0

run_gc deep verify --deep --json "$pool"
check "gc verify --deep exits 0 (got $rc)" test "$rc" -eq 0
check "gc verify --deep is quiet on stderr" quiet deep
check "gc verify --deep: deep true" test "$(json_val "$tmp/gc-deep.out" deep)" = true
check "gc verify --deep checks every value ($entries)" \
	test "$(json_int "$tmp/gc-deep.out" checksums_checked)" = "$entries"
check "gc verify --deep: checksums_bad 0, problems 0" test \
	"$(json_int "$tmp/gc-deep.out" checksums_bad) $(json_int "$tmp/gc-deep.out" problems)" = "0 0"
[ "$rc" -eq 0 ] || show "$tmp/gc-deep.out" "$tmp/gc-deep.err"

MARUKV_POOL=$pool "$gc" -q --json verify >"$tmp/gc-env.out" 2>&1
rc=$?
check "gc honours \$MARUKV_POOL (exit $rc)" test "$(json_val "$tmp/gc-env.out" path)" = "\"$pool\""

run_gc dry --json --dry-run reclaim "$pool"
check "gc --dry-run reclaim exits 0 (got $rc)" test "$rc" -eq 0
check "gc --dry-run reclaim is quiet on stderr" quiet dry
keys=$(json_keys "$tmp/gc-dry.out")
expected="command path dry_run clients readers pins pages requests "
check "gc --json reclaim has the documented keys, in order" test "$keys" = "$expected"
[ "$keys" = "$expected" ] || { echo "#   got: $keys"; show "$tmp/gc-dry.out" "$tmp/gc-dry.err"; }
check "gc --dry-run reclaim: dry_run true" test "$(json_val "$tmp/gc-dry.out" dry_run)" = true
check "gc --dry-run reclaim: no dead client in a clean pool" \
	test "$(json_int "$tmp/gc-dry.out" clients)" = 0
run_gc reclaim reclaim "$pool"
check "gc reclaim exits 0 (got $rc)" test "$rc" -eq 0
check "gc reclaim is quiet on stderr" quiet reclaim
check "gc reclaim: dry run: no" test "$(field "$tmp/gc-reclaim.out" 'dry run')" = no
[ "$rc" -eq 0 ] || show "$tmp/gc-reclaim.out" "$tmp/gc-reclaim.err"
run_gc verify2 verify "$pool"
check "gc verify after reclaim exits 0 (got $rc)" test "$rc" -eq 0

# A pool of its own to evict from: 16 blocks of one page in 32 pages.
epool=$tmp/evict
"$bench" demo --pool "$epool" --prompts 4 --blocks 4 --block-size 65536 --readers 2 \
	>"$tmp/edemo.out" 2>&1 || show "$tmp/edemo.out"
"$stat" --json "$epool" >"$tmp/e0.json" 2>&1
free0=$(json_int "$tmp/e0.json" pages_free)
entries0=$(json_int "$tmp/e0.json" entries)
total=$(json_int "$tmp/e0.json" pages_total)
check "evict pool is under 90% free (free $free0 of $total)" \
	test "$((${free0:-0} * 100))" -lt "$((${total:-0} * 90))"

run_gc edry --json --dry-run evict --to 90 "$epool"
check "gc --dry-run evict --to 90 exits 0 (got $rc)" test "$rc" -eq 0
check "gc --dry-run evict is quiet on stderr" quiet edry
keys=$(json_keys "$tmp/gc-edry.out")
expected="command path dry_run to_percent keys pages pages_free "
check "gc --json evict has the documented keys, in order" test "$keys" = "$expected"
[ "$keys" = "$expected" ] || { echo "#   got: $keys"; show "$tmp/gc-edry.out" "$tmp/gc-edry.err"; }
check "gc --dry-run evict would evict keys" test "$(json_int "$tmp/gc-edry.out" keys)" -gt 0
"$stat" --json "$epool" >"$tmp/e1.json" 2>&1
check "gc --dry-run evict changes nothing (entries, pages_free)" test \
	"$(json_int "$tmp/e1.json" entries) $(json_int "$tmp/e1.json" pages_free)" = "$entries0 $free0"

run_gc evict --json evict --to 90% "$epool"
check "gc evict --to 90% exits 0 (got $rc)" test "$rc" -eq 0
check "gc evict is quiet on stderr" quiet evict
[ "$rc" -eq 0 ] || show "$tmp/gc-evict.out" "$tmp/gc-evict.err"
evicted=$(json_int "$tmp/gc-evict.out" keys)
check "gc evict: to_percent 90, dry_run false" test \
	"$(json_int "$tmp/gc-evict.out" to_percent) $(json_val "$tmp/gc-evict.out" dry_run)" = "90 false"
check "gc evict evicted keys ($evicted)" test "${evicted:-0}" -gt 0
check "gc evict: the dry run said the same ($(json_int "$tmp/gc-edry.out" keys))" \
	test "$(json_int "$tmp/gc-edry.out" keys)" = "$evicted"
"$stat" --json "$epool" >"$tmp/e2.json" 2>&1
free2=$(json_int "$tmp/e2.json" pages_free)
check "gc evict frees pages (pages_free $free0 -> $free2)" test "${free2:-0}" -gt "${free0:-0}"
check "gc evict: at least 90% free or quarantined after it" test \
	"$(( (${free2:-0} + $(json_int "$tmp/e2.json" pages_quarantined)) * 100 ))" -ge "$((total * 90))"
check "gc evict: entries $entries0 - $evicted" \
	test "$(json_int "$tmp/e2.json" entries)" = "$((entries0 - ${evicted:-0}))"
check "gc evict: stat evictions = $evicted" test "$(json_int "$tmp/e2.json" evictions)" = "$evicted"
run_gc everify verify --deep "$epool"
check "gc verify --deep after evict exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || show "$tmp/gc-everify.out" "$tmp/gc-everify.err"

# Watermarks: set through the holder, shown by stat, checked.
run_gc wm --json watermarks --low 20 --high 30 "$epool"
check "gc watermarks exits 0 (got $rc)" test "$rc" -eq 0
check "gc watermarks reports 20/30" test \
	"$(json_int "$tmp/gc-wm.out" low_watermark)/$(json_int "$tmp/gc-wm.out" high_watermark)" = "20/30"
"$stat" --json "$epool" >"$tmp/e3.json" 2>&1
check "stat shows the new watermarks" test \
	"$(json_int "$tmp/e3.json" low_watermark)/$(json_int "$tmp/e3.json" high_watermark)" = "20/30"
run_gc wmbad watermarks --low 40 --high 30 "$epool"
check "gc watermarks with low above high exits 2 (got $rc)" test "$rc" -eq 2

# Usage errors: exit 2, a message on stderr, nothing on stdout.
usage_case() {
	desc=$1
	shift
	"$gc" "$@" >"$tmp/gc-usage.out" 2>"$tmp/gc-usage.err"
	r=$?
	if [ "$r" -eq 2 ] && [ ! -s "$tmp/gc-usage.out" ] && [ -s "$tmp/gc-usage.err" ]; then
		ok "gc $desc: exit 2, stderr only"
	else
		not_ok "gc $desc: exit 2, stderr only (got $r)"
		show "$tmp/gc-usage.out" "$tmp/gc-usage.err"
	fi
}
usage_case "without a command"
usage_case "unknown command" frobnicate "$pool"
usage_case "evict without --to" evict "$pool"
usage_case "evict --to 101" evict --to 101 "$pool"
usage_case "evict --to abc" evict --to abc "$pool"
usage_case "evict --to -1" evict --to -1 "$pool"
usage_case "reclaim --deep" reclaim --deep "$pool"
usage_case "verify --to 50" verify --to 50 "$pool"
usage_case "--dry-run verify" --dry-run verify "$pool"
usage_case "verify with two pools" verify "$pool" "$pool"
usage_case "a bad option" --no-such-option verify "$pool"
usage_case "--json with a bad option (no JSON)" --json --no-such-option verify "$pool"
usage_case "--json evict --to 101 (no JSON)" --json evict --to 101 "$pool"
# An empty POOL is a usage error, not the default pool (here $MARUKV_POOL's).
for args in "--json verify" "--json --dry-run evict --to 100" "-n reclaim"; do
	# shellcheck disable=SC2086 # $args is a word list
	MARUKV_POOL=$epool "$gc" $args '' >"$tmp/gc-empty.out" 2>"$tmp/gc-empty.err"
	rc=$?
	check "gc $args '' is a usage error: exit 2 (got $rc), 'the pool argument is empty', nothing on stdout" \
		test "$rc $(tr '\n' '|' <"$tmp/gc-empty.err")$(wc -c <"$tmp/gc-empty.out")" = \
		"2 marukv-gc: the pool argument is empty|Try 'marukv-gc --help'.|0"
done

run_gc missing verify "$tmp/missing"
check "gc verify on a missing pool exits 2 (got $rc)" test "$rc" -eq 2
check "gc on a missing pool prints nothing on stdout" test ! -s "$tmp/gc-missing.out"
check "gc on a missing pool says 'marukv-gc: POOL: ...' on stderr" \
	grep -q "^marukv-gc: $tmp/missing: ." "$tmp/gc-missing.err"
run_gc missing2 --json reclaim "$tmp/missing"
check "gc --json reclaim on a missing pool exits 2 (got $rc)" test "$rc" -eq 2
check "gc on a missing pool does not create it" test ! -e "$tmp/missing"

# A damaged pool: flip a byte of a published value in the data arena
# (the file `data`, page i at i * page_size; only values were written, so
# the first non-zero byte is one of them).
dpool=$tmp/damaged
"$bench" demo --pool "$dpool" --prompts 2 --blocks 2 --block-size 65536 --readers 1 \
	>"$tmp/ddemo.out" 2>&1 || show "$tmp/ddemo.out"
off=$(LC_ALL=C cmp "$dpool/data" /dev/zero 2>/dev/null |
	sed -n 's/.* differ: [a-z]* \([0-9][0-9]*\),.*/\1/p')
if [ -n "$off" ]; then
	off=$((off - 1))
	byte=$(od -A n -t u1 -j "$off" -N 1 "$dpool/data" | tr -d ' ')
	# shellcheck disable=SC2059 # the format is the byte
	printf "\\$(printf %03o "$((byte ^ 255))")" |
		dd of="$dpool/data" bs=1 seek="$off" count=1 conv=notrunc 2>/dev/null
	check "damage: the byte at $off changed" \
		test "$(od -A n -t u1 -j "$off" -N 1 "$dpool/data" | tr -d ' ')" = "$((byte ^ 255))"
	run_gc dshallow --json verify "$dpool"
	check "gc verify (not deep) of the damaged pool exits 0: the registry is sound (got $rc)" \
		test "$rc" -eq 0
	run_gc damaged --json verify --deep "$dpool"
	check "gc verify --deep of the damaged pool exits 1 (got $rc)" test "$rc" -eq 1
	check "gc verify --deep: checksums_bad >= 1" \
		test "$(json_int "$tmp/gc-damaged.out" checksums_bad)" -ge 1
	check "gc verify --deep: problems >= 1" \
		test "$(json_int "$tmp/gc-damaged.out" problems)" -ge 1
	check "gc verify --deep: first_problem says what" \
		test "$(json_val "$tmp/gc-damaged.out" first_problem)" != '""'
	check "gc verify --deep of the damaged pool: nothing on stderr" quiet damaged
	[ "$rc" -eq 1 ] || show "$tmp/gc-damaged.out" "$tmp/gc-damaged.err"
	run_gc damagedh verify --deep "$dpool"
	check "gc verify --deep (human) of the damaged pool exits 1 (got $rc)" test "$rc" -eq 1
	check "gc verify --deep (human): checksums bad: 1" \
		test "$(field "$tmp/gc-damagedh.out" 'checksums bad')" = 1
else
	not_ok "damage: found a published value's byte in $dpool/data"
fi

# The progress line: on a terminal only (script(1) gives it one), not with -q.
if command -v script >/dev/null 2>&1 &&
	script -qec true /dev/null </dev/null >/dev/null 2>&1; then
	script -qec "'$gc' verify --deep '$pool' >/dev/null" /dev/null </dev/null \
		>"$tmp/gc-tty.out" 2>&1
	check "gc verify on a terminal shows 'verify: 100% (N/N)' on stderr" \
		grep -aq "verify: 100% ($entries/$entries)" "$tmp/gc-tty.out"
	check "gc verify on a terminal wipes the progress line" \
		test "$(tail -c 1 "$tmp/gc-tty.out" | od -A n -c | tr -d ' ')" = '\r'
	script -qec "'$gc' -q verify --deep '$pool' >/dev/null" /dev/null </dev/null \
		>"$tmp/gc-ttyq.out" 2>&1
	check "gc -q verify on a terminal prints nothing on stderr" test ! -s "$tmp/gc-ttyq.out"
else
	skip "no script(1): progress line on a terminal"
fi
if [ -w /dev/full ]; then
	"$gc" --json verify "$pool" >/dev/full 2>"$tmp/gc-full.err"
	rc=$?
	check "gc to a full stdout exits 2 (got $rc)" test "$rc" -eq 2
	check "gc to a full stdout says so on stderr" test -s "$tmp/gc-full.err"
else
	skip "no /dev/full: stdout write error"
fi
check "gc -V prints 'marukv-gc $version'" test "$("$gc" -V)" = "marukv-gc $version"
check "gc --help exits 0" "$gc" --help >/dev/null

# ---- JSON strings of any bytes ------------------------------------------------

# A path is bytes: --json must stay valid JSON and valid UTF-8 whatever they
# are, and give them back (marukv-stat(1), JSON OUTPUT).  A pool whose name
# holds a quote, a backslash, control characters, well-formed multi-byte
# characters (é, €, U+1F600) and ill-formed UTF-8: a lone FF and 80, an
# overlong '/' (C0 AF), a surrogate (ED A0 80), a code point above U+10FFFF
# (F4 90 80 80), a truncated sequence (E2 82) before an ASCII letter.
py=/usr/bin/python3
weird=$tmp/$(printf 'q"b\\s\001t\tn\ne\033.\303\251\342\202\254\360\237\230\200.\377\200.\300\257.\355\240\200.\364\220\200\200.\342\202z')
# json_ok FILE PATH [KEY...]: FILE holds one JSON object and nothing else,
# parsed strictly (UTF-8, no raw control characters), whose "path" gives
# back the bytes of PATH (surrogateescape), and whose first keys are KEY...
json_ok() {
	"$py" -c '
import json, os, sys
o = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert isinstance(o, dict), "not an object"
got = o["path"].encode("utf-8", "surrogateescape")
assert got == os.fsencode(sys.argv[2]), "path %r, expected %r" % (got, os.fsencode(sys.argv[2]))
keys = sys.argv[3:]
assert list(o)[:len(keys)] == keys, "keys %r, expected %r first" % (list(o), keys)
' "$@" 2>"$tmp/json_ok.err" && return 0
	show "$tmp/json_ok.err" "$1"
	return 1
}
if [ ! -x "$py" ]; then
	skip "no $py (Debian: python3): JSON of any bytes"
elif "$bench" demo --pool "$weird" --prompts 1 --blocks 1 --block-size 65536 --readers 1 \
	>"$tmp/wdemo.out" 2>&1; then
	"$stat" --json "$weird" >"$tmp/wstat.json" 2>"$tmp/wstat.err"
	rc=$?
	check "stat --json of a pool named with any bytes: exit 0 (got $rc), strict JSON, path round trip" \
		exits 0 json_ok "$tmp/wstat.json" "$weird" path uuid
	run_gc wverify --json verify "$weird"
	check "gc --json verify of a pool named with any bytes: exit 0 (got $rc), strict JSON, path round trip" \
		exits 0 json_ok "$tmp/gc-wverify.out" "$weird" command path deep
	check "gc --json verify of a pool named with any bytes: only escapes, no raw byte" \
		grep -q '"path": ".*/q\\"b\\\\s\\u0001t\\tn\\ne\\u001b\.é€😀\.\\udcff\\udc80\.\\udcc0\\udcaf\.\\udced\\udca0\\udc80\.\\udcf4\\udc90\\udc80\\udc80\.\\udce2\\udc82z",$' \
		"$tmp/gc-wverify.out"
else
	not_ok "bench demo makes a pool named with any bytes"
	show "$tmp/wdemo.out"
fi

# ---- errors with --json ----------------------------------------------------

# With --json, a pool that cannot be opened or read still gives one JSON
# object on stdout, the error object (both man pages), as well as the
# message on stderr, and exit status 2.
# mkv_code NAME: the value of MKV_E_NAME in marukv.h.
mkv_code() { sed -n "s/^#define MKV_E_$1 *(\(-[0-9A-Z]*\)).*/\1/p" "$top_srcdir/include/marukv.h"; }
# json_err FILE PATH CODE [COMMAND]: FILE holds one JSON object and nothing
# else, strictly parsed, with exactly the keys of the error object (command
# first if COMMAND is given), the bytes of PATH, the integer CODE (-10003,
# or -ENOENT for -errno) and non-empty texts.
json_err() {
	"$py" -c '
import errno, json, os, sys
o = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert isinstance(o, dict), "not an object"
c = sys.argv[3]
code = -getattr(errno, c[1:]) if c.startswith("-E") else int(c)
keys = ["command"] * (len(sys.argv) > 4) + ["path", "error", "error_code", "message"]
assert list(o) == keys, "keys %r, expected %r" % (list(o), keys)
if len(sys.argv) > 4:
    assert o["command"] == sys.argv[4], "command %r" % o["command"]
got = o["path"].encode("utf-8", "surrogateescape")
assert got == os.fsencode(sys.argv[2]), "path %r, expected %r" % (got, os.fsencode(sys.argv[2]))
assert type(o["error_code"]) is int and o["error_code"] == code, \
    "error_code %r, expected %s (%d)" % (o["error_code"], c, code)
for k in ("error", "message"):
    assert isinstance(o[k], str) and o[k], "%s %r" % (k, o[k])
' "$@" 2>"$tmp/json_err.err" && return 0
	show "$tmp/json_err.err" "$1"
	return 1
}
# A directory that is not a pool (named with any bytes), a file where the
# pool's directory should be, and a pool whose superblock was damaged.
notpool=$weird.empty
mkdir "$notpool"
: >"$tmp/file"
spool=$tmp/super
"$bench" demo --pool "$spool" --prompts 1 --blocks 1 --block-size 65536 --readers 1 \
	>"$tmp/sdemo.out" 2>&1 || show "$tmp/sdemo.out"
# The byte at 16 is the uuid's first, under the superblock's checksum.
byte=$(od -A n -t u1 -j 16 -N 1 "$spool/super" | tr -d ' ')
# shellcheck disable=SC2059 # the format is the byte
printf "\\$(printf %03o "$((byte ^ 255))")" |
	dd of="$spool/super" bs=1 seek=16 count=1 conv=notrunc 2>/dev/null
# err_ok BASE PROG PATH CODE [COMMAND]: the tool exited with 2 ($rc), said
# "PROG: " first on stderr (BASE.err), and printed the error object on
# stdout (BASE.out) -- that last part only with $py.
err_ok() {
	base=$1
	prog=$2
	shift 2
	[ "$rc" -eq 2 ] || return 1
	if [ "$(head -c $((${#prog} + 2)) "$base.err")" != "$prog: " ]; then
		show "$base.err"
		return 1
	fi
	[ ! -x "$py" ] || json_err "$base.out" "$@"
}
[ -x "$py" ] || skip "no $py (Debian: python3): error objects (exit status and stderr only)"
for c in "missing:$tmp/missing:NOENT" "notpool:$notpool:NOENT" "file:$tmp/file:NOTPOOL" \
	"super:$spool:CORRUPT"; do
	what=${c%%:*}
	path=${c#*:}
	path=${path%:*}
	code=$(mkv_code "${c##*:}")
	"$stat" --json "$path" >"$tmp/err-$what.out" 2>"$tmp/err-$what.err"
	rc=$?
	check "stat --json, $what: exit 2 (got $rc), stderr, the error object ($code)" \
		err_ok "$tmp/err-$what" marukv-stat "$path" "$code"
	run_gc "err-$what" --json verify "$path"
	check "gc --json verify, $what: exit 2 (got $rc), stderr, the error object ($code)" \
		err_ok "$tmp/gc-err-$what" marukv-gc "$path" "$code" verify
	run_gc "errw-$what" -j reclaim "$path"
	check "gc -j reclaim, $what: exit 2 (got $rc), stderr, the error object ($code)" \
		err_ok "$tmp/gc-errw-$what" marukv-gc "$path" "$code" reclaim
done

# ---- man pages --------------------------------------------------------------

if command -v mandoc >/dev/null 2>&1; then
	for m in marukv.7 marukv.3 marukv-stat.1 marukv-gc.1 marukv-bench.1 marukv-python.7 \
		marukv-dump.1 marukv-load.1; do
		out=$(mandoc -T lint -W warning "$top_builddir/man/$m" 2>&1)
		check "mandoc -T lint -W warning man/$m is clean" test -z "$out"
		[ -z "$out" ] || echo "$out" | sed 's/^/#   /'
	done
	check "man pages carry the package version" \
		grep -q "^\.TH .* \"marukv $version\"" "$top_builddir/man/marukv.7"
else
	skip "mandoc not installed: man page lint"
fi

# ---- documented examples ------------------------------------------------------

# build NAME: compile $disk/NAME.c against the library just built.
build() {
	# shellcheck disable=SC2086 # CC and SAN_CFLAGS are word lists
	"$top_builddir/libtool" --quiet --mode=link $CC $SAN_CFLAGS -std=gnu11 \
		-Wall -Wextra -Werror -I"$top_srcdir/include" -o "$disk/$1" "$disk/$1.c" \
		"$top_builddir/src/libmarukv.la" >"$disk/$1.err" 2>&1
}
# run_twice NAME EXPECTED: run it twice (create, then find) on its own pool.
run_twice() {
	r=0
	for _ in 1 2; do
		MARUKV_POOL=$disk/pool-$1 "$disk/$1" >"$disk/$1.out" 2>&1 || r=1
		grep -q "$2" "$disk/$1.out" || r=1
	done
	[ "$r" -eq 0 ] || show "$disk/$1.out"
	return "$r"
}

awk '/^```c$/ { f = 1; next } /^```$/ { if (f) exit } f' "$top_srcdir/README" >"$disk/readme.c"
if [ -s "$disk/readme.c" ] && build readme; then
	ok "README example compiles"
	check "README example runs (twice)" run_twice readme 'hello -> world (6 bytes)'
else
	not_ok "README example compiles"
	show "$disk/readme.err"
fi

awk '/^\.EX$/ { f = 1; next } /^\.EE$/ { exit } f' "$top_builddir/man/marukv.3" |
	sed 's/\\e/\\/g; s/\\-/-/g; s/\\&//g' >"$disk/man3.c"
if [ -s "$disk/man3.c" ] && build man3; then
	ok "marukv(3) example compiles"
	check "marukv(3) example runs (twice)" run_twice man3 '4096 bytes, first 0x2a'
else
	not_ok "marukv(3) example compiles"
	show "$disk/man3.err"
fi

# ---- marukv-gc reclaim of a dead client ------------------------------------

# A client that dies holding a view (a pin) and two granted pages.
cat >"$disk/dead.c" <<'EOF'
#include <marukv.h>
#include <signal.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct mkv_pool *pool;
	struct mkv_buf buf;
	struct mkv_view view;

	if (argc != 2 || mkv_pool_open(argv[1], 0, NULL, &pool) < 0)
		return 1;
	if (mkv_put(pool, "dead-client", 11, "x", 1) < 0 ||
	    mkv_get(pool, "dead-client", 11, &view) < 0 ||
	    mkv_alloc(pool, 2 * 65536, &buf) < 0)
		return 1;
	memset(buf.data, 1, buf.len);
	raise(SIGKILL);
	return 1;
}
EOF
if build dead; then
	ok "dead-client helper compiles"
	"$disk/dead" "$epool" 2>/dev/null
	rc=$?
	check "dead-client helper died of SIGKILL (got $rc)" test "$rc" -eq 137
	dead_row='    { "slot": [0-9]+, "node": "[^"]*", "pid": [0-9]+, "alive": false, "rdonly": false, "holder": (true|false), "pin": [1-9][0-9]*, "pages_granted": 2, '
	"$stat" --json "$epool" >"$tmp/d0.json" 2>&1
	check "stat lists the dead client (alive false, a pin, 2 pages granted)" \
		grep -Eq "^$dead_row" "$tmp/d0.json"
	check "stat counts 2 clients" test "$(json_int "$tmp/d0.json" clients)" = 2
	run_gc ddry --json --dry-run reclaim "$epool"
	check "gc --dry-run reclaim with a dead client exits 0 (got $rc)" test "$rc" -eq 0
	check "gc --dry-run reclaim would free 1 client, 1 pin, 2 pages" test \
		"$(json_int "$tmp/gc-ddry.out" clients) $(json_int "$tmp/gc-ddry.out" pins) $(json_int "$tmp/gc-ddry.out" pages)" \
		= "1 1 2"
	"$stat" --json "$epool" >"$tmp/d1.json" 2>&1
	check "gc --dry-run reclaim changed nothing (the dead client is still listed)" \
		grep -Eq "^$dead_row" "$tmp/d1.json"
	run_gc dreal --json reclaim "$epool"
	check "gc reclaim with a dead client exits 0 (got $rc)" test "$rc" -eq 0
	check "gc reclaim is quiet on stderr" quiet dreal
	check "gc reclaim freed 1 client" test "$(json_int "$tmp/gc-dreal.out" clients)" = 1
	[ "$rc" -eq 0 ] || show "$tmp/gc-dreal.out" "$tmp/gc-dreal.err"
	"$stat" --json "$epool" >"$tmp/d2.json" 2>&1
	check "after reclaim: 1 client (stat), none dead, no page granted" test \
		"$(json_int "$tmp/d2.json" clients) $(grep -c '"alive": false' "$tmp/d2.json") $(json_int "$tmp/d2.json" pages_granted)" \
		= "1 0 0"
	run_gc dverify verify "$epool"
	check "gc verify after reclaim exits 0, no leaked page (got $rc)" \
		test "$rc $(field "$tmp/gc-dverify.out" 'pages leaked')" = "0 0"
else
	not_ok "dead-client helper compiles"
	show "$disk/dead.err"
fi

# CI runs the README's test command and nothing else.
ci=$(sed -n '$p' "$top_srcdir/.ci/run")
check "README's second line is .ci/run's command" \
	test "$(sed -n 2p "$top_srcdir/README")" = "$ci"
# apt_list LINE: the packages README's command on that line installs.
apt_list() { sed -n "${1}s/.*apt-get install -y \([^&]*\) && .*/\1/p" "$top_srcdir/README"; }
check "README's two commands install the same packages, clang's fuzzer runtime included" \
	test "$(apt_list 1)" = "$(apt_list 2)" -a -n "$(apt_list 1 | grep -w libclang-rt-14-dev)"
# am_list VAR: the words of Makefile.am's variable VAR, its += lines too, one a line.
am_list() {
	awk -v v="$1" '$1 == v && ($2 == "=" || $2 == "+=") { on = 1; $1 = $2 = "" }
		on { c = sub(/\\$/, ""); print; on = c }' "$top_srcdir/Makefile.am" |
		tr ' \t' '\n\n' | grep -v '^$' | sort
}
# TESTS lists the suites in the order they start: none may be left out.
am_list TESTS >"$tmp/am-tests"
am_list check_suites >"$tmp/am-suites"
check "every Check suite is in TESTS, and every suite of the non-coherent pass" \
	test -z "$(comm -23 "$tmp/am-suites" "$tmp/am-tests")$(am_list NONCOHERENT_TESTS |
		comm -23 - "$tmp/am-suites")" -a -s "$tmp/am-suites"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
