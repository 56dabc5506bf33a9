#!/bin/sh
# autogk-hook v1: installed by `autogk hooks install`; remove with `autogk hooks uninstall`.
# Only commits on an experiment branch (autogk/<target>/<NNNN>-<slug>) start Python: every other
# commit leaves here after one `git symbolic-ref`.
here=$(dirname "$0")
name=$(basename "$0")
if [ -x "$here/$name.autogk-chained" ]; then "$here/$name.autogk-chained" "$@" || exit $?; fi
case "$(git symbolic-ref -q HEAD 2>/dev/null)" in
  refs/heads/autogk/*/[0-9][0-9][0-9][0-9]*) exec "@PYTHON@" -m autogk_git.hook "$name" "$@" ;;
esac
exit 0
