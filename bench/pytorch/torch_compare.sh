#!/bin/sh
# torch_compare.sh: the PyTorch-level comparisons of the `coll` backend against gloo on one
# build, with the right interpreter and module: torch_allreduce.py (all_reduce, 8 B - 64 MiB)
# and torch_step_compare.py (FSDP2 transformer and DDP MLP step times), both beside it.
#
#   bench/pytorch/torch_compare.sh [BUILD_DIR] [allreduce|step|all] [OPTIONS...]
#                                         defaults: build all; OPTIONS go to the script(s)
#
# TORCH picks the PyTorch: `2` (default when the build has one) is the torch 2.x the build
# was configured with (-Dtorch2_python, ./dev test's virtual environment) and its module
# BUILD_DIR/torch_coll/torch2; `system` is Debian's /usr/bin/python3 (torch 1.13) and
# BUILD_DIR/torch_coll. With `all`, OPTIONS must suit both scripts (-n, --rounds,
# --quick, --timeout). The load average is printed before each script (the scripts print
# it again with the host's steal time). Exit status: the worst of the scripts' (0 targets
# met, 1 a target missed, 2 not runnable, 3 a rank failed).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "$(dirname "$here")")/build}
[ $# -gt 0 ] && shift
what=${1:-all}
case $what in
  allreduce | step | all) [ $# -gt 0 ] && shift ;;
  -*) what=all ;;
  *) echo "torch_compare: say allreduce, step or all, not '$what'" >&2; exit 2 ;;
esac
case $build in /*) ;; *) build=$(pwd)/$build ;; esac

# The torch 2.x interpreter this build was configured with (meson's record of
# -Dtorch2_python), empty when none.
torch2_python() {
  opts=$build/meson-info/intro-buildoptions.json
  [ -f "$opts" ] || return 0
  /usr/bin/python3 -c '
import json, sys
for o in json.load(open(sys.argv[1])):
    if o["name"] == "torch2_python":
        print(o["value"])' "$opts"
}

py2=$(torch2_python)
flavor=${TORCH:-}
if [ -z "$flavor" ]; then
  if [ -n "$py2" ] && ls "$build"/torch_coll/torch2/torch_coll*.so >/dev/null 2>&1; then
    flavor=2
  else
    flavor=system
  fi
fi
case $flavor in
  2)
    if [ -z "$py2" ] || [ ! -x "$py2" ]; then
      echo "torch_compare: $build was configured without -Dtorch2_python (or it is gone): TORCH=system" >&2
      exit 2
    fi
    python=$py2
    module=$build/torch_coll/torch2
    ;;
  system)
    python=/usr/bin/python3
    module=$build/torch_coll
    ;;
  *) echo "torch_compare: TORCH is 2 or system, not '$flavor'" >&2; exit 2 ;;
esac
ls "$module"/torch_coll*.so >/dev/null 2>&1 || {
  echo "torch_compare: no torch_coll module in $module (ninja -C $build)" >&2
  exit 2
}

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export PYTHONPATH="$module${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::UserWarning}"

worst=0
run() {
  echo "== $(date '+%F %T') $(uptime | sed 's/.*load average/load average/'); $python $*"
  "$python" "$@" --build "$build"
  rc=$?
  [ $rc -gt $worst ] && worst=$rc
  echo
}
if [ "$what" = allreduce ] || [ "$what" = all ]; then run "$here/torch_allreduce.py" "$@"; fi
if [ "$what" = step ] || [ "$what" = all ]; then run "$here/torch_step_compare.py" "$@"; fi
exit $worst
