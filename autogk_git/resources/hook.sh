#!/bin/sh
# autogk-hook v1: installed by `autogk hooks install`; remove with `autogk hooks uninstall`.
# Only commits on an experiment branch (autogk/<target>/<NNNN>-<slug>) start Python: every other
# commit leaves here after one `git symbolic-ref`, and the loop's own (AUTOGK_LOOP set: the hooks leave
# them to the loop, env.in_loop) before it. Python starts without this folder (the checkout's top)
# on sys.path, so a folder named autogk_git in the checkout cannot stand in for autogk (procs.SAFE_BOOT).
here=$(dirname "$0")
name=$(basename "$0")
if [ -x "$here/$name.autogk-chained" ]; then "$here/$name.autogk-chained" "$@" || exit $?; fi
[ -n "${AUTOGK_LOOP:-}" ] && exit 0
case "$(git symbolic-ref -q HEAD 2>/dev/null)" in
  refs/heads/autogk/*/[0-9][0-9][0-9][0-9]*) exec "@PYTHON@" -c '@BOOT@' autogk_git.hook "$name" "$@" ;;
esac
exit 0
