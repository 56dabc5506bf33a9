"""Hook shim templates, shipped inside the package as autogk_git.shims."""
