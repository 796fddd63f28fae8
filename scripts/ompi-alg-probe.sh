#!/usr/bin/env bash
# Which algorithm Open MPI's coll framework runs, as it runs: an LD_PRELOAD
# shim that wraps every ompi_coll_base_{allreduce,allgather,reduce_scatter,
# alltoall}_* algorithm of libmpi (mca_coll_tuned.so calls them through its
# PLT) and prints, on rank 0, each call's algorithm and element count. Open
# MPI's own coll_tuned_verbose names no decision in a build without
# --enable-debug (Debian's: `ompi_info --parsable --all | grep option:debug`).
#
#   scripts/ompi-alg-probe.sh mpirun -np 4 target/debug/all_gather_perf -b 4M -e 16M -f 2 -n 2 -w 1
#
# prints "[algshim rank 0] ompi_coll_base_allgather_intra_recursivedoubling
# (count 262144)" per call (the benchmark's own small all-gathers of count 1
# included). LIBMPI overrides the library the shim wraps; the shim is built in
# a /tmp/ompi-alg-probe.* folder, left there.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,14s/^# \{0,1\}//p' "$0" >&2; exit 2; }
libmpi=${LIBMPI:-$(ldconfig -p | awk '/libmpi\.so\.40 / {print $NF; exit}')}
[ -n "$libmpi" ] || { echo "ompi-alg-probe.sh: no libmpi.so.40 (set LIBMPI)" >&2; exit 2; }
dir=$(mktemp -d /tmp/ompi-alg-probe.XXXXXX)
syms=$(nm -D --defined-only "$libmpi" | awk '{print $3}' |
    grep -E '^ompi_coll_base_(allgather|allreduce|alltoall|reduce_scatter)(_block)?_(intra_|basic)')
{
    cat <<'H'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Every argument passed on as a long: the algorithms take pointers and ints
   only, so the registers and stack slots reach the real function unchanged. */
typedef long (*fn)(long, long, long, long, long, long, long, long, long, long);
/* The element count per rank: allreduce's count (3rd argument),
   reduce_scatter's rcounts[0] (3rd, an int *), the others' scount (2nd). */
static long count_of(const char *n, long b, long c) {
    if (strstr(n, "allreduce")) return c;
    if (strstr(n, "reduce_scatter_intra")) return *(int *)c;
    return b;
}
static void say(const char *n, long b, long c) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (r && strcmp(r, "0") == 0)
        fprintf(stderr, "[algshim rank 0] %s (count %ld)\n", n, count_of(n, b, c));
}
H
    for s in $syms; do
        cat <<C
long $s(long a, long b, long c, long d, long e, long f, long g, long h, long i, long j) {
    static fn real;
    if (!real) real = (fn)dlsym(RTLD_NEXT, "$s");
    say("$s", b, c);
    return real(a, b, c, d, e, f, g, h, i, j);
}
C
    done
} >"$dir/shim.c"
cc -O1 -shared -fPIC -o "$dir/algshim.so" "$dir/shim.c" -ldl
# mpirun passes -x to the ranks; other launchers take LD_PRELOAD from the environment.
if [ "$(basename "$1")" = mpirun ]; then
    exec "$1" -x LD_PRELOAD="$dir/algshim.so" "${@:2}"
fi
LD_PRELOAD="$dir/algshim.so" exec "$@"
