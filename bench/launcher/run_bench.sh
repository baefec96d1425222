#!/usr/bin/env bash
# Launcher benchmark: ddprun side by side with torchrun, medians of repetitions in a balanced order.
# Builds nothing: give it a build directory that has the targets ddprun, fork_floor,
# supervise_floor, stamp_worker and bench_run
# (cmake --build <dir> --target ddprun fork_floor supervise_floor stamp_worker bench_run).
#
# usage: bench/launcher/run_bench.sh <build-dir> [repetitions, default 10; multiples of 10 balance
#        the order of the launchers, see below]
# env:   TORCHRUN  the torchrun command line (default: Debian's torch 1.13 through the wrapper
#                  /usr/bin/python3 <repo>/scripts/torchrun-1.13)
#        TORCHRUN2 the torchrun 2.x command line (default: the project's torch 2.x,
#                  <repo>/.venv/torch2/bin/python -m torch.distributed.run, made by
#                  scripts/setup.sh; its column shows "-" when that is missing)
#        TORCHRUN_IS_DDPRUN=1  the torchrun slots run a ddprun (another build, other flags):
#                  give them the caller's TMPDIR too, as the ddprun column has
#
# Prints a markdown table on stdout (progress on stderr). Measured, per launcher:
#   launch   whole-run wall time of `--no_python --nproc_per_node 8 /bin/true`; the floor is
#            fork_floor: fork/exec 8 /bin/true and wait
#   failure  8 stamp_worker workers with --max_restarts 1: rank 0 fails (its CLOCK_REALTIME
#            time just before exit), the 7 siblings record when SIGTERM arrives, then the
#            restarted workers record when they start
#   rss      the launcher process's own peak RSS (VmHWM at its exit, via bench_run --rss), max
#            over the launch and failure scenarios
# The floor column is what the hardware allows: fork_floor for the launch, supervise_floor (a
# blocking waitpid loop that SIGTERMs and restarts, nothing else) for the reactions.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
BUILD=$(realpath "$1")
REPS=${2:-10}
WORKERS=8
DDPRUN=$BUILD/launcher/ddprun
TOOLS=$BUILD/bench/launcher
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
read -r -a TORCHRUN_CMD <<<"${TORCHRUN:-/usr/bin/python3 $ROOT/scripts/torchrun-1.13}"
read -r -a TORCHRUN2_CMD <<<"${TORCHRUN2:-$ROOT/.venv/torch2/bin/python -m torch.distributed.run}"
for f in "$DDPRUN" "$TOOLS/fork_floor" "$TOOLS/supervise_floor" "$TOOLS/stamp_worker" \
         "$TOOLS/bench_run"; do
  [[ -x $f ]] || { echo "run_bench.sh: $f is missing: build it first" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddprun_bench_XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# ddprun runs with the caller's TMPDIR (set or not), as its users run it: where its temporary
# run directory goes is part of what a launch costs, and it removes that directory itself.
# torchrun leaves its log directories behind: it gets TMPDIR=$WORK/tmp, removed at the end.
CALLER_TMPDIR=${TMPDIR-}
CALLER_HAS_TMPDIR=${TMPDIR+set}
mkdir -p "$WORK/tmp"
# launcher_tmpdir <launcher|floor>: TMPDIR as that launcher gets it (call in a subshell).
launcher_tmpdir() {
  if [[ $1 == torchrun* && ${TORCHRUN_IS_DDPRUN:-0} != 1 ]]; then export TMPDIR=$WORK/tmp
  elif [[ -n $CALLER_HAS_TMPDIR ]]; then export TMPDIR=$CALLER_TMPDIR
  else unset TMPDIR; fi
}
LAUNCHERS=(ddprun torchrun torchrun_fast)
if [[ -x ${TORCHRUN2_CMD[0]} ]] || command -v "${TORCHRUN2_CMD[0]}" >/dev/null; then
  LAUNCHERS+=(torchrun2)
else
  echo "run_bench.sh: ${TORCHRUN2_CMD[0]} is missing: no torchrun 2.x column" >&2
fi

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# launcher_argv <name>: the launcher's command line up to its worker arguments, in LAUNCHER.
launcher_argv() {
  case $1 in
    ddprun) LAUNCHER=("$DDPRUN") ;;
    # torchrun's static rendezvous on a free loopback port (its default port 29500 is fixed).
    torchrun) LAUNCHER=("${TORCHRUN_CMD[@]}" --master_addr 127.0.0.1 --master_port "$(free_port)") ;;
    torchrun_fast) LAUNCHER=("${TORCHRUN_CMD[@]}" --master_addr 127.0.0.1
                             --master_port "$(free_port)" --monitor_interval 0.1) ;;
    # torchrun 2.x's own default --monitor-interval is already 0.1 s.
    torchrun2) LAUNCHER=("${TORCHRUN2_CMD[@]}" --master_addr 127.0.0.1 --master_port "$(free_port)") ;;
  esac
}

# bench_run output "key value" lines -> the value of key $2.
field() { awk -v k="$2" '$1 == k { print $2 }' <<<"$1"; }

record() { echo "$3" >>"$WORK/$1.$2"; }  # record <metric> <launcher> <value>

measure_launch() {  # measure_launch <launcher|floor>
  local out
  if [[ $1 == floor ]]; then
    out=$("$TOOLS/bench_run" --quiet -- "$TOOLS/fork_floor" "$WORKERS" /bin/true)
  else
    launcher_argv "$1"
    out=$(launcher_tmpdir "$1"; "$TOOLS/bench_run" --quiet -- "${LAUNCHER[@]}" --no_python \
          --nproc_per_node "$WORKERS" /bin/true)
  fi
  if [[ $(field "$out" exit) != 0 ]]; then echo "launch run of $1 failed; skipped" >&2; return; fi
  record launch "$1" "$(field "$out" wall_ns)"
}

measure_failure() {  # measure_failure <launcher|floor> [--rss]
  local out dir=$WORK/failure_$1
  rm -rf "$dir" && mkdir -p "$dir"
  if [[ $1 == floor ]]; then
    out=$(BENCH_OUT=$dir "$TOOLS/bench_run" --quiet -- "$TOOLS/supervise_floor" "$WORKERS" \
          "$TOOLS/stamp_worker")
  else
    launcher_argv "$1"
    out=$(launcher_tmpdir "$1"; BENCH_OUT=$dir "$TOOLS/bench_run" --quiet ${2:-} -- \
          "${LAUNCHER[@]}" --no_python --nproc_per_node "$WORKERS" --max_restarts 1 \
          "$TOOLS/stamp_worker")
  fi
  if [[ $(field "$out" exit) != 0 ]]; then echo "failure run of $1 failed; skipped" >&2; return; fi
  if [[ ${2:-} == --rss ]]; then record rss "$1" "$(field "$out" peak_rss_kb)"; return; fi
  local fail sigterms starts
  fail=$(cat "$dir/fail_0")
  sigterms=$(cat "$dir"/sigterm_* | sort -n)
  starts=$(cat "$dir"/start_1_* | sort -n)
  if [[ $(wc -l <<<"$sigterms") -ne $((WORKERS - 1)) || $(wc -l <<<"$starts") -ne $WORKERS ]]; then
    echo "failure run of $1 is missing timestamps; skipped" >&2
    return
  fi
  record sigterm_first "$1" $(($(head -1 <<<"$sigterms") - fail))
  record sigterm_last "$1" $(($(tail -1 <<<"$sigterms") - fail))
  record restart_first "$1" $(($(head -1 <<<"$starts") - fail))
  record restart_all "$1" $(($(tail -1 <<<"$starts") - fail))
}

measure_rss_launch() {
  launcher_argv "$1"
  local out
  out=$(launcher_tmpdir "$1"; "$TOOLS/bench_run" --quiet --rss -- "${LAUNCHER[@]}" --no_python \
        --nproc_per_node "$WORKERS" /bin/true)
  record rss "$1" "$(field "$out" peak_rss_kb)"
}

for ((rep = 1; rep <= REPS; ++rep)); do
  echo "repetition $rep/$REPS" >&2
  # The order changes from one repetition to the next as a balanced Latin square (a Williams
  # design): over every n repetitions (2n when n, the number of runs, is odd) each run comes
  # once in each position and once right after each of the others. What one run leaves behind
  # then hits all alike: drift in machine load, and whatever torchrun (a 235 MB Python process)
  # leaves behind, which slows the next ddprun launch by about 1.3 ms (cold CPU caches,
  # presumably) and the tiny fork_floor not measurably. (The plain alternation used before put
  # ddprun right after torchrun in every other repetition and the floor never.)
  all=(floor "${LAUNCHERS[@]}")
  n=${#all[@]}
  williams=(0)
  for ((k = 1; k < n; ++k)); do williams+=($((k % 2 ? (k + 1) / 2 : n - k / 2))); done
  order=()
  for ((k = 0; k < n; ++k)); do order+=("${all[$(((williams[k] + rep - 1) % n))]}"); done
  if ((n % 2 && (rep - 1) / n % 2)); then  # odd n: every other cycle runs the rows backwards
    for ((k = 0; k < n / 2; ++k)); do
      t=${order[k]}; order[k]=${order[n - 1 - k]}; order[n - 1 - k]=$t
    done
  fi
  for l in "${order[@]}"; do measure_launch "$l"; done
  for l in "${order[@]}"; do measure_failure "$l"; done
done
for l in "${LAUNCHERS[@]}"; do
  for ((rep = 1; rep <= 2; ++rep)); do measure_rss_launch "$l"; measure_failure "$l" --rss; done
done

# median <metric> <launcher> <divisor> <decimals>: "-" when nothing was recorded.
median() {
  local file=$WORK/$1.$2
  [[ -s $file ]] || { echo "-"; return; }
  sort -n "$file" | awk -v d="$3" -v p="$4" '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.*f", p, m / d }'
}
maximum() { [[ -s $WORK/$1.$2 ]] && sort -n "$WORK/$1.$2" | tail -1 | awk -v d="$3" '{ printf "%.1f", $1 / d }' || echo "-"; }

ms=1000000
n_launch=$(wc -l <"$WORK/launch.ddprun" 2>/dev/null || echo 0)
n_failure=$(wc -l <"$WORK/sigterm_first.ddprun" 2>/dev/null || echo 0)
echo "| metric (median of $REPS runs, balanced order) | floor | ddprun | torchrun 1.13 (--monitor_interval 5, its default) | torchrun 1.13 --monitor_interval 0.1 | torchrun 2.x (its default, 0.1) | target (ddprun) |"
echo "|---|---:|---:|---:|---:|---:|---|"
echo "| launch: whole run, 8 × \`--no_python /bin/true\` (ms) | $(median launch floor $ms 1) | $(median launch ddprun $ms 1) | $(median launch torchrun $ms 1) | $(median launch torchrun_fast $ms 1) | $(median launch torchrun2 $ms 1) | ≤ 2× floor |"
echo "| failure → first sibling gets SIGTERM (ms) | $(median sigterm_first floor $ms 3) | $(median sigterm_first ddprun $ms 3) | $(median sigterm_first torchrun $ms 1) | $(median sigterm_first torchrun_fast $ms 1) | $(median sigterm_first torchrun2 $ms 1) | |"
echo "| failure → last of 7 siblings gets SIGTERM (ms) | $(median sigterm_last floor $ms 3) | $(median sigterm_last ddprun $ms 3) | $(median sigterm_last torchrun $ms 1) | $(median sigterm_last torchrun_fast $ms 1) | $(median sigterm_last torchrun2 $ms 1) | < 1 ms |"
echo "| failure → first restarted worker running (ms) | $(median restart_first floor $ms 2) | $(median restart_first ddprun $ms 2) | $(median restart_first torchrun $ms 1) | $(median restart_first torchrun_fast $ms 1) | $(median restart_first torchrun2 $ms 1) | < 5 ms |"
echo "| failure → all 8 restarted workers running (ms) | $(median restart_all floor $ms 2) | $(median restart_all ddprun $ms 2) | $(median restart_all torchrun $ms 1) | $(median restart_all torchrun_fast $ms 1) | $(median restart_all torchrun2 $ms 1) | |"
echo "| launcher peak RSS, own process (MB, max of 4 runs) | | $(maximum rss ddprun 1024) | $(maximum rss torchrun 1024) | $(maximum rss torchrun_fast 1024) | $(maximum rss torchrun2 1024) | < 8 MB |"
echo
echo "Runs kept: launch $n_launch/$REPS, failure $n_failure/$REPS (ddprun)."
