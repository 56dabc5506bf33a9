"""Cheat or bug: the process ends during import, with no exception (exit code 0)."""
import os

os._exit(0)


def run(x, bias, scale, out):
    pass
