#!/bin/sh
# negative_control.sh: runs a negative control (a build made to break one rule) and passes only
# when it fails for that reason: its exit status is the expected one, its output (stdout and
# stderr) has a line matching --expect, no line matching --forbid, and every "CHECK failed" line
# matches --only. Any other outcome fails, saying which: a control that passes, crashes, or fails
# for another reason proves nothing. A control that skips (exit 77) is passed on as a skip.
#
#   negative_control.sh --status N --expect RE [--forbid RE] [--only RE] -- COMMAND [ARG ...]
set -u
status="" expect="" forbid="" only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --status) status=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --forbid) forbid=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "negative_control.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$status" ] && [ -n "$expect" ] && [ $# -gt 0 ] || { echo "negative_control.sh: --status, --expect and a command are needed" >&2; exit 2; }
out=$(mktemp "${TMPDIR:-/tmp}/strata-control-XXXXXX")
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -eq 77 ]; then echo "negative control skipped"; exit 77; fi
why=""
[ $rc -eq "$status" ] || why="exit status $rc, expected $status"
[ -z "$why" ] && ! grep -Eq -- "$expect" "$out" && why="no line matches '$expect'"
[ -z "$why" ] && [ -n "$forbid" ] && grep -Eq -- "$forbid" "$out" && why="a line matches '$forbid': $(grep -E -- "$forbid" "$out" | head -1)"
if [ -z "$why" ] && [ -n "$only" ]; then
  other=$(grep 'CHECK failed' "$out" | grep -Ev -- "$only" | head -1)
  [ -n "$other" ] && why="it also failed for another reason: $other"
fi
if [ -n "$why" ]; then echo "NEGATIVE CONTROL NOT PROVEN: $why"; exit 1; fi
echo "negative control failed as it must ($expect)"
exit 0
