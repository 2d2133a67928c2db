#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t/modules.sh -- the module map is a test: the calls between the objects
# of the library (each object's undefined symbols joined to the objects
# that define them) must be exactly the calls src/MODULES lists, every
# source file must belong to a module, and the modules must form layers
# (tsort finds no loop).  The files of a group (the registry) may call
# each other.  Exits 77 where the objects are not there to read.
set -u
srcdir=${srcdir:-.}
map=$srcdir/src/MODULES
objs=(src/.libs/libmarukv_core_la-*.o)
if [ ! -r "${objs[0]}" ] || ! command -v nm >/dev/null; then
	echo "modules: no objects in src/.libs, or no nm: skipped"
	exit 77
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mkvmod.XXXXXX") || exit 99
trap 'rm -rf "$scratch"' EXIT

# file -> module, from the groups; every other file is a module of its own
awk -F' *= *' '/^[a-z0-9]+ *=/ { n = split($2, f, " "); for (i = 1; i <= n; i++) print f[i], $1 }' \
	"$map" | sort >"$scratch/groups"
module_of() {
	awk 'NR == FNR { g[$1] = $2; next } { print (($1 in g) ? g[$1] : $1), (($2 in g) ? g[$2] : $2) }' \
		"$scratch/groups" -
}

for o in "${objs[@]}"; do
	n=${o##*/libmarukv_core_la-}
	n=${n%.o}
	nm --defined-only -g "$o" | awk -v n="$n" 'NF == 3 { print $3, n }' >>"$scratch/defs"
	nm -u "$o" | awk -v n="$n" '{ print $2, n }' >>"$scratch/uses"
done
sort -o "$scratch/defs" "$scratch/defs"
sort -o "$scratch/uses" "$scratch/uses"
join "$scratch/uses" "$scratch/defs" | awk '{ print $2, $3 }' | module_of |
	awk '$1 != $2 && $2 != "error" && $2 != "log"' | sort -u >"$scratch/calls"

# the map's edges, and its modules
awk -F: '/^[a-z0-9]+:/ { n = split($2, c, " "); for (i = 1; i <= n; i++) print $1, c[i] }' \
	"$map" | sort -u >"$scratch/edges"
awk -F: '/^[a-z0-9]+:/ { print $1 }' "$map" | sort -u >"$scratch/modules"

fail=0
while read -r a b; do
	echo "modules: $a calls $b, which src/MODULES does not allow"
	fail=1
done < <(comm -23 "$scratch/calls" "$scratch/edges")
while read -r a b; do
	echo "modules: src/MODULES lets $a call $b, which it does not: remove the edge"
	fail=1
done < <(comm -13 "$scratch/calls" "$scratch/edges")
for o in "${objs[@]}"; do
	n=${o##*/libmarukv_core_la-}
	echo "${n%.o}"
done | sed 's/$/ x/' | module_of | awk '{ print $1 }' | sort -u >"$scratch/have"
while read -r m; do
	echo "modules: $m is in no module of src/MODULES"
	fail=1
done < <(comm -23 "$scratch/have" "$scratch/modules")
while read -r m; do
	echo "modules: src/MODULES names $m, which is no object of the library"
	fail=1
done < <(comm -13 "$scratch/have" "$scratch/modules")
if ! tsort "$scratch/calls" >"$scratch/order" 2>"$scratch/loops"; then
	echo "modules: the calls between modules loop:"
	sed 's/^/  /' "$scratch/loops"
	fail=1
fi
[ "$fail" = 0 ] && echo "modules: $(wc -l <"$scratch/calls") calls between $(wc -l <"$scratch/modules") modules, as src/MODULES lists them, in layers"
exit "$fail"
