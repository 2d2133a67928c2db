#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh -- the benchmark set that `make bench` runs (not part of `make
# check`): every marukv-bench command but demo, with --json, at the
# commands' default scales, a few minutes on two cores.  It writes
# OUT.json, one object holding each command's object under the command's
# name, and OUT.txt, the same figures as tables, so that both come from
# the same run.  Commands this marukv-bench does not list in --help are
# left out.
#
# The Redis peer of lookup, getsize and put needs redis-server: run as
# root, this installs it with apt-get when it is missing.
#
# usage: run.sh BENCH OUT
#   BENCH  the marukv-bench to run
#   OUT    the results' path, without .json and .txt
# Environment: BENCH_DIR, where the scratch pools go (default /dev/shm).
# Exit: 0 if every command succeeded, 1 if one failed (the others' results
# are written all the same), 2 on a usage error or a missing redis-server.

set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 BENCH OUT" >&2
	exit 2
fi
bench=$1
out=$2
dir=${BENCH_DIR:-/dev/shm}
# The set, in order, and the options some of its commands get.
set_commands="register takeover hitrate evict lookup getsize put flush coherence hash remote"
options_of() {
	case $1 in
	register) echo "--writers 1,2,4,8" ;;
	# The cost curves: lookups as the pool and the readers grow.
	lookup) echo "--keys 10000,100000,1000000 --readers 1,2,4,8" ;;
	# Every row on coherent and non-coherent pools in one run, for the
	# ratio of their medians; fewer trials, as an other-host trial may
	# wait out a client timeout.
	takeover) echo "--both --same-node --other-node --other-host --trials 10" ;;
	esac
}

# A string as the inside of a JSON string literal.
esc() { printf '%s' "$1" | sed 's/[\\"]/\\&/g'; }

need_redis() {
	command -v redis-server >/dev/null 2>&1 && return 0
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "run.sh: installing redis-server (the Redis peer) with apt-get" >&2
		apt-get update >&2 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server >&2
		command -v redis-server >/dev/null 2>&1 && return 0
	fi
	echo "run.sh: redis-server is not installed: install it as root (Debian:" \
		"apt-get install redis-server), or run make bench as root to let it do so" >&2
	exit 2
}

# json2txt: a --json object as text: its scalar members on one line, then
# each array of objects as a table, a row per object and a column per
# member; members of nested objects get a column each, under a heading
# that names the object.
json2txt() {
	awk '
	{ s = s $0 "\n" }
	END {
		n = length(s); pos = 1; value("")
		head = ""
		for (i = 1; i <= np; i++)
			if (path[i] !~ /\[/)
				head = head (head == "" ? "" : ", ") path[i] " " val[path[i]]
		print head
		for (t = 1; t <= nt; t++)
			table(tname[t])
	}
	function ws() { while (pos <= n && substr(s, pos, 1) ~ /[ \t\r\n]/) pos++ }
	function str(   o, c) {
		pos++; o = ""
		while ((c = substr(s, pos, 1)) != "\"") {
			if (c == "\\") { o = o substr(s, pos, 2); pos += 2 } else { o = o c; pos++ }
		}
		pos++
		return o
	}
	function value(p,   c, k, i, lit) {
		ws(); c = substr(s, pos, 1)
		if (c == "{") {
			pos++; ws()
			if (substr(s, pos, 1) == "}") { pos++; return }
			for (;;) {
				ws(); k = str(); ws(); pos++
				value(p == "" ? k : p "." k)
				ws(); c = substr(s, pos++, 1)
				if (c == "}") return
			}
		}
		if (c == "[") {
			pos++; ws()
			if (substr(s, pos, 1) == "]") { pos++; return }
			for (i = 0; ; i++) {
				value(p "[" i "]")
				ws(); c = substr(s, pos++, 1)
				if (c == "]") return
			}
		}
		if (c == "\"") { leaf(p, str()); return }
		lit = ""
		while (pos <= n && substr(s, pos, 1) !~ /[,}\] \t\r\n]/)
			lit = lit substr(s, pos++, 1)
		leaf(p, lit)
	}
	# A scalar at path p: arrays of objects are tables, rows by index.
	function leaf(p, v,   a, name, row, col) {
		path[++np] = p; val[p] = v
		if (match(p, /\[[0-9]+\]\./)) {
			name = substr(p, 1, RSTART - 1)
			row = substr(p, RSTART + 1, RLENGTH - 3)
			col = substr(p, RSTART + RLENGTH)
			if (!(name in seen)) { seen[name] = 1; tname[++nt] = name }
			if (!((name, col) in hascol)) {
				hascol[name, col] = 1; cols[name, ++ncol[name]] = col
			}
			if (row + 1 > nrow[name]) nrow[name] = row + 1
			cell[name, row, col] = v
		}
	}
	function table(name,   c, r, w, g, l, d, line1, line2) {
		for (c = 1; c <= ncol[name]; c++) {
			d = cols[name, c]
			g[c] = d; l[c] = d
			if (match(d, /\.[^.]*$/)) { g[c] = substr(d, 1, RSTART - 1); l[c] = substr(d, RSTART + 1) }
			else g[c] = ""
			w[c] = length(l[c])
			for (r = 0; r < nrow[name]; r++)
				if (length(cell[name, r, d]) > w[c]) w[c] = length(cell[name, r, d])
		}
		print "\n" name ":"
		line1 = ""; line2 = ""
		for (c = 1; c <= ncol[name]; c++) {
			line1 = line1 sprintf("%-" w[c] "s  ", c > 1 && g[c] == g[c - 1] ? "" : g[c])
			line2 = line2 sprintf("%" w[c] "s  ", l[c])
		}
		if (line1 ~ /[^ ]/) out(line1)
		out(line2)
		for (r = 0; r < nrow[name]; r++) {
			line1 = ""
			for (c = 1; c <= ncol[name]; c++)
				line1 = line1 sprintf("%" w[c] "s  ", cell[name, r, cols[name, c]])
			out(line1)
		}
	}
	function out(line) { sub(/ +$/, "", line); print line }'
}

listed=$("$bench" --help | awk '/^commands:/ { f = 1; next } f && /^  [a-z]/ { print $1 }')
if printf '%s\n' "$listed" | grep -qxE 'lookup|getsize|put'; then
	need_redis
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/marukv-bench-run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

failed=""
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{\n  "version": "%s",\n  "date": "%s",\n  "cpus": %s,\n  "kernel": "%s",\n  "dir": "%s",\n  "results": {' \
	"$(esc "$("$bench" -V)")" "$date" "$(nproc)" "$(esc "$(uname -r)")" "$(esc "$dir")" \
	>"$tmp/all.json"
{
	echo "marukv-bench results: $("$bench" -V), $date," \
		"$(nproc) CPUs, Linux $(uname -r), scratch in $dir"
	echo "(the same figures as $(basename "$out").json; see marukv-bench(1))"
} >"$tmp/all.txt"
sep=""
for cmd in $set_commands; do
	if ! printf '%s\n' "$listed" | grep -qx "$cmd"; then
		echo "run.sh: $cmd: not a command of this marukv-bench, left out" >&2
		continue
	fi
	read -ra extra <<<"$(options_of "$cmd")"
	echo "run.sh: marukv-bench $cmd ${extra[*]} --json --dir $dir" >&2
	start=$(date +%s)
	if "$bench" "$cmd" "${extra[@]}" --json --dir "$dir" >"$tmp/$cmd.json"; then
		secs=$(($(date +%s) - start))
		printf '%s\n    "%s": %s' "$sep" "$cmd" "$(sed '2,$s/^/    /' "$tmp/$cmd.json")" \
			>>"$tmp/all.json"
		sep=","
		{ echo; echo "== $cmd ($secs s) =="; json2txt <"$tmp/$cmd.json"; } >>"$tmp/all.txt"
	else
		echo "run.sh: marukv-bench $cmd failed" >&2
		failed="$failed $cmd"
		{ echo; echo "== $cmd: FAILED =="; } >>"$tmp/all.txt"
	fi
done
printf '\n  },\n  "failed": [' >>"$tmp/all.json"
sep=""
for cmd in $failed; do
	printf '%s"%s"' "$sep" "$cmd" >>"$tmp/all.json"
	sep=", "
done
printf ']\n}\n' >>"$tmp/all.json"
mv "$tmp/all.json" "$out.json"
mv "$tmp/all.txt" "$out.txt"
echo "run.sh: wrote $out.json and $out.txt" >&2
[ -z "$failed" ]
