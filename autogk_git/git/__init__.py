"""Everything that runs git lives in this package, and the rest of autogk asks it by named verb.

run.py        the one function that starts git (and the author identity autogk commits with)
repo.py       refs, objects, commit facts, notes
worktrees.py  worktrees, the shared git directory, which worktree has a branch, the hooks folder
index.py      a checkout's index and files: changes, staging, putting files back
commits.py    making commits and repositories; lines of history read back
merges.py     cherry-picks and bisects
remotes.py    remotes: names, URLs, fetch, push
settings.py   git config values
hooks.py      installing autogk's hooks

A raw command line outside this package fails tests/test_architecture.py.
"""
