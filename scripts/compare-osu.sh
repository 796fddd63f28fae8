#!/usr/bin/env bash
# compare-osu.sh: our collective binaries, a bare loop of the same MPI call, and OSU
# Micro-Benchmarks side by side: same MPI, same ranks, same call, datatype, count,
# root and buffer alignment, and the ratios between them.
#
#   OSU_COLLECTIVE_DIR=/path/to/osu/mpi/collective/blocking scripts/compare-osu.sh
#
# Three programs time each call:
#   ours  fabricbench's binary (its CSV's time_us, full precision), back to back
#         (-z 0, nccl-tests' method) and with -z 3 (OSU's method: a barrier between
#         iterations, outside the timed time);
#   bare  scripts/bare-loop.c, built here with this MPI's mpicc: the same call in a
#         loop with nothing around it, back to back ("b2b") and OSU's way ("barrier");
#   osu   OSU's benchmark of the call (-T mpi_float for the float ones, root fixed at 0).
#         OSU prints 2 decimals (0.01 us, 4% of an 8-byte allreduce here) unless built
#         with more: make CFLAGS="-O2 -DFLOAT_PRECISION=4" (the script says so when not).
# Ratios: harness = ours / bare and z3/bar = ours -z 3 / bare barrier (what our
# harness costs, same method); method = bare barrier / OSU (what remains between the
# same call timed the same way by two programs); vs-osu: at the smallest size the time
# ours -z 3 / OSU, at 16 MiB and above the algbw ratio ours / OSU (= OSU's time / ours,
# ours back to back as users run it).
#
# Environment:
#   OSU_COLLECTIVE_DIR  folder with osu_allreduce, osu_bcast, ... (required)
#   NP                  ranks (default 2; more than the cores: oversubscribed)
#   REPEATS             rounds of runs (each program once per round, in a random order) at the bandwidth sizes; the median
#                       is kept (default 5); SMALL_REPEATS at the smallest size (default 31:
#                       runs are short there and one launch differs from the next by up to
#                       2x, so resolving 5% takes many launches; see the intervals)
#   SMALL_ITERS         timed iterations at the smallest size (default 100000); LARGE_ITERS
#                       at the bandwidth sizes (default 20)
#   SMALL_WARMUP        untimed iterations first, for all three programs (default: as many as
#                       SMALL_ITERS; OSU's own default is 200); LARGE_WARMUP (10, OSU's). With
#                       4 ranks on 2 cores, 200 left a loop of 8-byte broadcasts or reduces
#                       still settling: the bare loop's first timed loop took 1.0-2.3x as
#                       long as its second (median 1.3x), and our in-place column, our second
#                       loop, looked 30% faster than the bare loop's one. After as many warm-up
#                       calls as timed ones, the two loops agree.
#   LARGE_SIZES         bandwidth sizes in OSU's bytes (default "16777216 67108864")
#   COLLECTIVES         which rows (default: all eight)
#   PERCENTILES         1 (default): ours back to back as users run it, one clock read after
#                       every call (for the p50..max columns; about 4% of an 8-byte
#                       allreduce here); 0: with --percentiles 0, the loop timed whole as
#                       nccl-tests and the bare loop time it (-z 3 always times each call)
#   SAMPLES_DIR         keep every launch's time there, one file per row and program
#                       (<collective>-<size>-<program>.txt, microseconds, in run order)
#   FABRICBENCH_BIN     our binaries (default target/release; built when missing)
#   BIND                core (default): every program's ranks bound round-robin to the
#                       cores (--map-by core --bind-to core:overload-allowed), so every
#                       launch places its ranks alike; none: unbound, where the scheduler
#                       puts them. Open MPI binds up to one rank per core by itself, but
#                       leaves oversubscribed ranks unbound, and there a 4-rank 256 MiB
#                       allgather varied 130-240 ms from one launch to the next, bound
#                       140-180 ms: unbound, rank placement swamps a 3% difference.
#
# Targets: at the smallest size ours within 5% of bare (-z 0 against b2b) and, with
# -z 3, within 5% of OSU; at 16 MiB and above our algbw within 3% of OSU's. Each ratio
# comes with a 95% bootstrap interval over the launches: a verdict is "within" only
# when the whole interval is, "outside" only when none of it is, else "unresolved".
# The last two lines pool the rows (smallest sizes, then 16 MiB and above): each
# ratio's geometric mean over the rows with a 95% interval, which can show a harness
# cost, or a gap to OSU that the bare loop shares, where no single row resolves 3%.
# Timings on a shared host are noisy: run it on an idle machine and read ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

osu=${OSU_COLLECTIVE_DIR:-}
if [ -z "$osu" ] || [ ! -x "$osu/osu_allreduce" ]; then
    echo "compare-osu.sh: set OSU_COLLECTIVE_DIR to the folder holding OSU's osu_allreduce (OSU Micro-Benchmarks, built with this MPI's mpicc)" >&2
    exit 2
fi
np=${NP:-2}
repeats=${REPEATS:-5}
small_repeats=${SMALL_REPEATS:-31}
small_iters=${SMALL_ITERS:-100000}
large_iters=${LARGE_ITERS:-20}
small_warmup=${SMALL_WARMUP:-$small_iters}
large_warmup=${LARGE_WARMUP:-10}
large_sizes=${LARGE_SIZES:-"16777216 67108864"}
only=${COLLECTIVES:-}
for setting in NP="$np" REPEATS="$repeats" SMALL_REPEATS="$small_repeats" SMALL_ITERS="$small_iters" \
    LARGE_ITERS="$large_iters" SMALL_WARMUP="$small_warmup" LARGE_WARMUP="$large_warmup"; do
    least=1
    case $setting in *WARMUP=*) least=0 ;; esac
    case ${setting#*=} in
        '' | *[!0-9]*) ;;
        *) [ "${setting#*=}" -ge "$least" ] 2>/dev/null && continue ;;
    esac
    echo "compare-osu.sh: ${setting}: use a whole number >= $least, e.g. ${setting%%=*}=5" >&2
    exit 2
done
case ${PERCENTILES:-1} in
    0 | 1) ;;
    *) echo "compare-osu.sh: PERCENTILES=$PERCENTILES: use 1 (ours times every call) or 0 (ours times the loop whole)" >&2; exit 2 ;;
esac
case ${BIND:-core} in
    core) bind=(--map-by core --bind-to core:overload-allowed) ;;
    none) bind=(--bind-to none) ;;
    *) echo "compare-osu.sh: BIND=$BIND: use core (ranks bound round-robin to cores) or none (unbound)" >&2; exit 2 ;;
esac
for size in $large_sizes; do
    case $size in
        '' | *[!0-9]* | 0) echo "compare-osu.sh: LARGE_SIZES has '$size': give sizes in bytes, e.g. LARGE_SIZES=\"16777216 67108864\"" >&2; exit 2 ;;
    esac
done
if [ -n "${SAMPLES_DIR:-}" ] && ! { mkdir -p "$SAMPLES_DIR" 2>/dev/null && [ -d "$SAMPLES_DIR" ] && [ -w "$SAMPLES_DIR" ]; }; then
    echo "compare-osu.sh: SAMPLES_DIR=$SAMPLES_DIR is not a folder this user can write; give a folder path, e.g. SAMPLES_DIR=osu-samples" >&2
    exit 2
fi
bin=${FABRICBENCH_BIN:-target/release}
stats=$bin/fabricbench-stats
if [ ! -x "$bin/all_reduce_perf" ] || [ ! -x "$stats" ]; then
    echo "# building release binaries into target/release" >&2
    cargo build --release --quiet
fi
python=""
for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import csv' 2>/dev/null; then python=$candidate; break; fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/bare-loop" scripts/bare-loop.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# ours, osu, bare call, our datatype, OSU's -T, size scale (our size = OSU size x
# this: nccl-tests counts the whole result where OSU counts one rank's part), the
# smallest OSU size (a chunked collective's per-rank chunk is a multiple of 16 bytes
# in nccl-tests, so 8 B does not exist there), and our placement holding the same MPI
# call (in_place for Broadcast: out of place, the root also copies its send buffer
# into its receive buffer, as NCCL defines the call; MPI_Bcast does not).
pairs=(
    "all_reduce_perf     osu_allreduce      allreduce      float mpi_float 1   8            out-of-place"
    "broadcast_perf      osu_bcast          bcast          int8  mpi_char  1   8            in-place"
    "reduce_perf         osu_reduce         reduce         float mpi_float 1   8            out-of-place"
    "reduce_scatter_perf osu_reduce_scatter reduce_scatter float mpi_float 1   $((16 * np)) out-of-place"
    "all_gather_perf     osu_allgather      allgather      int8  mpi_char  $np 16           out-of-place"
    "alltoall_perf       osu_alltoall       alltoall       int8  mpi_char  $np 16           out-of-place"
    "gather_perf         osu_gather         gather         int8  mpi_char  $np 16           out-of-place"
    "scatter_perf        osu_scatter        scatter        int8  mpi_char  $np 16           out-of-place"
)

# Our time (us) for one size and placement, from the CSV (the table rounds to 0.01 us).
ours_time() {
    local binary=$1 dtype=$2 size=$3 iters=$4 warmup=$5 placement=$6 z=$7
    local csv="$work/ours-$RANDOM$RANDOM.csv" whole=()
    [ "$z" = 0 ] && [ "${PERCENTILES:-1}" = 0 ] && whole=(--percentiles 0)
    mpirun -np "$np" "${bind[@]}" "$bin/$binary" -b "$size" -e "$size" -n "$iters" -w "$warmup" -c 0 -d "$dtype" \
        -z "$z" "${whole[@]}" -T 300 --csv "$csv" >/dev/null
    "$python" - "$csv" "$placement" <<'EOF'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    if row["placement"] == sys.argv[2]:
        print(row["time_us"])
EOF
    rm -f "$csv"
}

bare_time() {
    local call=$1 type=$2 size=$3 iters=$4 warmup=$5 mode=$6
    mpirun -np "$np" "${bind[@]}" "$work/bare-loop" "$call" "$type" "$size" "$iters" "$warmup" "$mode" | awk '{print $2}'
}

# OSU's average latency (us) for one size.
osu_time() {
    local binary=$1 type=$2 size=$3 iters=$4 warmup=$5
    mpirun -np "$np" "${bind[@]}" "$osu/$binary" -m "$size:$size" -i "$iters" -x "$warmup" -T "$type" |
        awk -v s="$size" '$1 == s {print $2; exit}'
}

# The statistics are fabricbench's own (fabricbench-stats: src/stats/interval.rs, the
# definition compare and rack_check judge with).
# ratio NUM DEN T: its line "ratio lo hi verdict rounds resolve" for the ratio of the
# medians NUM/DEN against the band 1-T..1+T (95% bootstrap interval, fixed seed).
ratio() {
    "$stats" --band "$(awk -v t="$3" 'BEGIN { printf "%.6f:%.6f", 1 - t, 1 + t }')" "$1" "$2" 2>/dev/null || true
}
inside() { [ "$(awk '{print $4}' <<<"$1")" = inside ]; }
outside() { case $(awk '{print $4}' <<<"$1") in below | above) return 0 ;; esac; return 1; }
median() { "$stats" "$1" | awk '{printf "%.4g", $1}'; }

# One row from the five programs' samples (files, one time per line): the medians, the
# ratios of the medians with the 95% interval of each, and a verdict that is "within"
# or "outside" only when the interval is: a run too noisy to decide (or with fewer
# than 3 launches) says "unresolved" rather than guess.
judge() { # name size small(1|0) ours bare ours-z3 bare-bar osu
    local name=$1 size=$2 small=$3 f err
    shift 3
    local o=$1 b=$2 oz=$3 bb=$4 u=$5
    for f in "$@"; do
        # A time that is not a positive number (an error message), or no time at all.
        if ! err=$("$stats" "$f" 2>&1 >/dev/null); then
            printf '  %-20s %10s BAD DATA: %s\n' "$name" "$size" "${err#fabricbench-stats: error: }"
            return 1
        fi
    done
    local t harness harness_z3 method vs_osu verdict
    t=$([ "$small" = 1 ] && echo 0.05 || echo 0.03)
    harness=$(ratio "$o" "$b" "$t")
    harness_z3=$(ratio "$oz" "$bb" "$t")
    method=$(ratio "$bb" "$u" "$t")
    if [ "$small" = 1 ]; then
        vs_osu=$(ratio "$oz" "$u" 0.05) # time, OSU's method on both sides
        if inside "$harness" && inside "$vs_osu"; then
            verdict="within target"
        elif outside "$harness" || outside "$vs_osu"; then
            verdict="outside target"
        else
            verdict="unresolved: an interval crosses 5% (more SMALL_REPEATS)"
        fi
    else
        vs_osu=$(ratio "$u" "$o" 0.03) # algbw ours / OSU: the same bytes, so OSU's time over ours
        if inside "$vs_osu"; then
            verdict="within target"
        elif inside "$harness" && inside "$(ratio "$u" "$oz" 0.03)"; then
            verdict="outside: back to back vs a barrier per call (-z 3 matches OSU; README)"
        elif inside "$harness" && inside "$harness_z3"; then
            verdict="outside: the harness is not the cause (ours = bare); README"
        elif outside "$vs_osu"; then
            verdict="outside target"
        else
            verdict="unresolved: an interval crosses 3% (more REPEATS)"
        fi
    fi
    r() { awk '{printf "%.3f", $1}' <<<"$1"; }
    ci() { awk '{printf "%.2f-%.2f", $2, $3}' <<<"$1"; }
    printf '  %-20s %10s %9s %9s %9s %9s %9s | %8s %9s %8s %8s %8s %9s  %s\n' "$name" "$size" \
        "$(median "$o")" "$(median "$b")" "$(median "$oz")" "$(median "$bb")" "$(median "$u")" \
        "$(r "$harness")" "$(ci "$harness")" "$(r "$harness_z3")" "$(r "$method")" "$(r "$vs_osu")" "$(ci "$vs_osu")" "$verdict"
    [ "$verdict" = "within target" ]
}

# The rows pooled, the smallest sizes apart from the bandwidth sizes: the geometric
# mean over rows of each ratio of medians, with a 95% interval from resampling every
# row's launches (fabricbench-stats with the rows' files in pairs). One row rarely
# settles 3% on a noisy host; the rows together say whether the harness costs
# anything (ours/bare), and whether a gap to OSU is the method's (the bare loop's
# algbw ratio to OSU as far from 1 as ours) or ours.
pooled() { # a folder holding 1/ (smallest sizes) and 0/, files <collective>-<size>.<program>
    local small label folder row found ok p a c what left line
    for small in 1 0; do
        label=$([ "$small" = 1 ] && echo "smallest sizes" || echo ">= 16 MiB")
        folder=$1/$small
        [ -d "$folder" ] || continue
        local -a rows=() parts=() files=()
        found=0
        for row in $(find "$folder" -type f -printf '%f\n' | sed 's/\.[^.]*$//' | sort -u); do
            found=$((found + 1))
            ok=1
            for p in o b oz bb u; do "$stats" "$folder/$row.$p" >/dev/null 2>&1 || ok=0; done
            [ "$ok" = 1 ] && rows+=("$row")
        done
        if [ "${#rows[@]}" = 0 ]; then
            echo "# pooled, $label: no row with a time from every program"
            continue
        fi
        left=
        [ "${#rows[@]}" = "$found" ] || left=", $((found - ${#rows[@]})) left out (no data, or a time that is not a positive number)"
        for p in "o b ours/bare" "oz bb z3/bar" "bb u bar/osu" "oz u z3/osu_time" "u o algbw_ours/osu" "u b algbw_bare/osu"; do
            read -r a c what <<<"$p"
            files=()
            for row in "${rows[@]}"; do files+=("$folder/$row.$a" "$folder/$row.$c"); done
            line=$("$stats" "${files[@]}" 2>/dev/null || true)
            parts+=("$(awk -v w="${what//_/ }" '{printf "%s %.3f (%.2f-%.2f)", w, $1, $2, $3}' <<<"$line")")
        done
        line=$(printf '%s, ' "${parts[@]}")
        echo "# pooled, $label, ${#rows[@]} rows$left (geometric means, 95%): ${line%, }"
    done
}

printf '# fabricbench vs a bare loop vs OSU Micro-Benchmarks, %s ranks on %s cores (BIND=%s, PERCENTILES=%s), medians of %s rounds (smallest size) and %s rounds (each program once a round, in random order), %s\n' \
    "$np" "$(nproc)" "${BIND:-core}" "${PERCENTILES:-1}" "$small_repeats" "$repeats" "$(mpirun --version | head -1)"
printf '# %-20s %10s %9s %9s %9s %9s %9s | %8s %9s %8s %8s %8s %9s  %s\n' collective "size(B)" ours bare ours-z3 bare-bar osu \
    harness "(95%)" harn-z3 method vs-osu "(95%)" verdict
printf '# %-20s %10s %9s %9s %9s %9s %9s | %8s %9s %8s %8s %8s\n' "" "" "(us)" "(us)" "(us)" "(us)" "(us)" \
    ours/bare "" z3/bar bar/osu ""
met=0 total=0
for pair in "${pairs[@]}"; do
    read -r ours osu_bin call dtype osu_type scale smallest placement <<<"$pair"
    case " $only " in "  ") ;; *" ${ours%_perf} "*) ;; *) continue ;; esac
    bare_type=$([ "$dtype" = float ] && echo float || echo char)
    for osu_size in $smallest $large_sizes; do
        small=$([ "$osu_size" = "$smallest" ] && echo 1 || echo 0)
        iters=$([ "$small" = 1 ] && echo "$small_iters" || echo "$large_iters")
        warm=$([ "$small" = 1 ] && echo "$small_warmup" || echo "$large_warmup")
        runs=$([ "$small" = 1 ] && echo "$small_repeats" || echo "$repeats")
        our_size=$((osu_size * scale))
        : >"$work/o" && : >"$work/b" && : >"$work/oz" && : >"$work/bb" && : >"$work/u"
        # Each round runs the five programs once, in a fresh random order: a program
        # never always follows the same one (the last launch's teardown, the page cache).
        for _ in $(seq "$runs"); do
            for program in $(shuf -e o b oz bb u); do
                case $program in
                    o) ours_time "$ours" "$dtype" "$our_size" "$iters" "$warm" "$placement" 0 ;;
                    b) bare_time "$call" "$bare_type" "$our_size" "$iters" "$warm" b2b ;;
                    oz) ours_time "$ours" "$dtype" "$our_size" "$iters" "$warm" "$placement" 3 ;;
                    bb) bare_time "$call" "$bare_type" "$our_size" "$iters" "$warm" barrier ;;
                    u) osu_time "$osu_bin" "$osu_type" "$osu_size" "$iters" "$warm" ;;
                esac >>"$work/$program"
            done
        done
        total=$((total + 1))
        if [ "$small" = 1 ] && [ -z "${osu_precision_noted:-}" ] && grep -qE '\.[0-9]{0,2}$' "$work/u"; then
            echo "# note: OSU prints its times to 0.01 us here; build it with make CFLAGS=\"-O2 -DFLOAT_PRECISION=4\" to resolve the smallest sizes"
            osu_precision_noted=1
        fi
        if [ -n "${SAMPLES_DIR:-}" ]; then
            for program in o:ours b:bare oz:ours-z3 bb:bare-bar u:osu; do
                cp "$work/${program%%:*}" "$SAMPLES_DIR/${ours%_perf}-$our_size-${program#*:}.txt"
            done
        fi
        judge "$ours" "$our_size" "$small" "$work/o" "$work/b" "$work/oz" "$work/bb" "$work/u" && met=$((met + 1))
        mkdir -p "$work/rows/$small"
        for program in o b oz bb u; do cp "$work/$program" "$work/rows/$small/${ours%_perf}-$our_size.$program"; done
    done
done
echo "# $met of $total within target (smallest size: ours/bare and ours -z 3/OSU within 5%; >= 16 MiB: our algbw within 3% of OSU's; each with its whole 95% interval)"
pooled "$work/rows"
