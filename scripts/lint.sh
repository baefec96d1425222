#!/usr/bin/env bash
# The style checks CI runs (docs/development.md): clang-format over every C++ file of the tree,
# and clang-tidy (.clang-tidy) over the product code of a clang build's compile database.
#
#   scripts/lint.sh [BUILD_DIR]       BUILD_DIR: a configured clang build (default build-clang);
#                                     configuring is enough. With DDPRUN_UNITY_BUILD=ON (what CI
#                                     lints: build-tidy/) clang-tidy reads each batch of up to 8
#                                     files once (scripts/tidy-inputs.py): the same checks of
#                                     the same code in about a sixth of the time
#   LINT_FIX=1                        rewrite the files clang-format would change, instead of
#                                     failing on them
#   TIDY_FILES="a.cc b.cc"            clang-tidy only these (default: every product .cc file)
#   LINT_DEEP=1                       also the clang static analyzer (clang-analyzer-*): three
#                                     times the tidy time (76 s instead of 26 s on four files);
#                                     run it before a release and after large changes. CI runs
#                                     the rest, to stay within its time.
#
# Needs clang-format-14 and clang-tidy-14 (scripts/setup.sh with WITH_CLANG=1). Exit status 1
# when either finds something, naming each file and line, and when clang-tidy fails (exits
# non-zero, crashes, cannot compile a file) without a finding to name.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-clang}
status=0

mapfile -t sources < <(git ls-files '*.cc' '*.h')
if [ "${LINT_FIX:-0}" = 1 ]; then
  clang-format-14 -i "${sources[@]}"
elif ! clang-format-14 --dry-run --Werror "${sources[@]}" 2>/tmp/lint-format.$$; then
  grep -E '^[^ ].*(warning|error):' /tmp/lint-format.$$ | head -50
  echo "lint: clang-format would change the files above (LINT_FIX=1 scripts/lint.sh fixes them)"
  status=1
fi
rm -f /tmp/lint-format.$$

if [ ! -f "$BUILD_DIR/compile_commands.json" ]; then
  echo "lint: $BUILD_DIR/compile_commands.json is missing: configure a clang build there first"
  exit 1
fi
# Product code only: tests and benchmarks follow the same style but are not gated on tidy.
if [ -n "${TIDY_FILES:-}" ]; then
  read -r -a tidy_files <<<"$TIDY_FILES"
else
  mapfile -t tidy_files < <(git ls-files 'common/*.cc' 'progress/*.cc' 'metrics/*.cc' 'store/*.cc' \
    'rendezvous/*.cc' 'agent/*.cc' 'launcher/*.cc')
fi
# The units clang-tidy reads: each file, or the unity batch it is compiled in. Diagnostics in a
# batch's files are, for clang-tidy, in included files: the header filter names the product
# .cc files besides .clang-tidy's headers. bugprone-suspicious-include would flag the batch's
# own #include of each .cc file: it is left to clang-tidy's check in per-file mode only, and
# the rule it enforces (no #include of a .c/.cc/.cpp/.cxx file) is checked below with grep on
# the product sources.
if ! units_list=$(scripts/tidy-inputs.py "$BUILD_DIR" "${tidy_files[@]}"); then
  echo "lint: not every file to check is in $BUILD_DIR's compile database"
  exit 1
fi
mapfile -t units <<<"$units_list"
config_filter=$(sed -n "s/^HeaderFilterRegex: '\(.*\)'$/\1/p" .clang-tidy)
header_filter="($config_filter)|(^.*/(common|progress|metrics|store|rendezvous|agent|launcher)/.*\.cc$)"
checks=-clang-analyzer-*
[ "${LINT_DEEP:-0}" = 1 ] && checks=
if printf '%s\n' "${units[@]}" | grep -q '/Unity/unity_[0-9]*_cxx\.cxx$'; then
  checks=$checks${checks:+,}-bugprone-suspicious-include
  # shellcheck disable=SC2046  # the headers: a list of paths
  if git grep -nE '^\s*#\s*include\s*["<][^">]*\.(c|cc|cpp|cxx)[">]' -- "${tidy_files[@]}" \
    $(git ls-files 'common/*.h' 'progress/*.h' 'metrics/*.h' 'store/*.h' 'rendezvous/*.h' \
      'agent/*.h' 'launcher/*.h'); then
    echo "lint: the lines above include an implementation file [bugprone-suspicious-include]"
    status=1
  fi
fi
analyzer=()
[ -n "$checks" ] && analyzer=(--checks="$checks")
log=$(mktemp)
# Both streams are kept: a file clang-tidy cannot compile or process ("Error while processing",
# a compile database without it) is reported on stderr only. xargs exits non-zero when any
# clang-tidy did (WarningsAsErrors: every finding is an error), and that alone fails the lint:
# a crash or a missing file must not pass for a clean run because it printed no "warning:".
tidy_status=0
printf '%s\n' "${units[@]}" |
  xargs -P "$(nproc)" -n 1 clang-tidy-14 -p "$BUILD_DIR" --quiet "${analyzer[@]}" \
    --header-filter="$header_filter" >"$log" 2>&1 || tidy_status=$?
problems=$(grep -E '(warning|error):' "$log" | sort -u || true)
if [ -n "$problems" ] || [ "$tidy_status" -ne 0 ]; then
  if [ -n "$problems" ]; then
    echo "$problems"
  else
    grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' "$log" | tail -30
  fi
  echo "lint: clang-tidy failed (exit status $tidy_status; $(grep -cE '(warning|error):' "$log")" \
    "problem line(s), above) on ${#tidy_files[@]} file(s) in ${#units[@]} unit(s)"
  status=1
fi
rm -f "$log"
[ "$status" -eq 0 ] &&
  echo "lint: clang-format and clang-tidy are clean (${#tidy_files[@]} files in ${#units[@]} units)"
exit "$status"
