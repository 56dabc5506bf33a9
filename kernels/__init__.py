"""Kernel targets of this repository; shipped inside the package as autogk_git.examples (init --example)."""
