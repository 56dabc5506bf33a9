#!/bin/sh
# autogk-hook v1 (reference-transaction): installed by `autogk hooks install`; remove with `autogk hooks uninstall`.
# A ref update that moves one of this clone's experiment refs (refs/autogk/kept|archive|untimed/...) from one
# commit to another is refused unless autogk makes it (its git commands carry AUTOGK_REF_WRITER): a plain
# `git fetch` or `git pull` of a remote's experiment refs would fast-forward this clone's kept #N onto a
# collaborator's commit. `autogk sync` fetches them and keeps this clone's own. Creations and deletions pass
# (git's own pack-refs makes both). Plain sh and its builtins: git runs this three times for every ref update.
check() {
  while read -r old new ref; do
    case $ref in refs/autogk/*) ;; *) continue ;; esac
    case $new in *[!0]*) ;; *) continue ;; esac
    # A command that does not say the old value (`git update-ref REF NEW`) gives zeros: read it.
    case $old in *[!0]*) ;; *) old=$(git rev-parse -q --verify "$ref" 2>/dev/null) || continue ;; esac
    [ "$old" = "$new" ] && continue
    echo "autogk: refused to move $ref from $old to $new: it is this clone's experiment ref (a kept, archived or held experiment)." >&2
    echo "autogk: fetch a remote's experiments with \`autogk sync\` (it brings theirs and keeps this clone's own); to move it on purpose: AUTOGK_REF_WRITER=1 git ..." >&2
    return 1
  done
  return 0
}
chained="${0%/*}/reference-transaction.autogk-chained"
if [ -x "$chained" ]; then
  input=$(cat)
  printf '%s\n' "$input" | "$chained" "$@" || exit $?
  [ "$1" = prepared ] && [ -z "${AUTOGK_REF_WRITER:-}" ] || exit 0
  printf '%s\n' "$input" | check
  exit $?
fi
[ "$1" = prepared ] && [ -z "${AUTOGK_REF_WRITER:-}" ] || exit 0
check
