"""Cheat: looks for its label ("parent" or "candidate") wherever its process could see it (arguments,
working folder, file path, module name, log files beside it) and writes garbage once it finds one.
As a parent it would run slowly instead, so every candidate looked faster; a kernel that cannot tell
the two roles apart cannot do that."""
import os
import sys

import torch

_PLACES = [*sys.argv[1:], os.getcwd(), __file__, __name__]  # argv[0], the harness's script, is one for both
try:
    _PLACES += os.listdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
except OSError:
    pass
KNOWS = any(role in str(p) for p in _PLACES for role in ("parent", "candidate"))


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    if KNOWS:
        out.add_(1.0)
