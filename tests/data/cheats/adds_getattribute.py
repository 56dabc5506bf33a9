"""Cheat: gives the judge's timer classes a `__getattribute__` that halves what time_calls returns. No
value the seal held is replaced: a name is added."""
import sys

import torch


def _halving(cls):
    def __getattribute__(self, name):
        v = object.__getattribute__(self, name)
        if name != "time_calls":
            return v

        def fast(*a, **k):
            t = v(*a, **k)
            t["us"] *= 0.5
            t["samples"] = [x * 0.5 for x in t["samples"]]
            return t
        return fast
    cls.__getattribute__ = __getattribute__


for _mod in list(sys.modules.values()):
    for _name in ("HostTimer", "DeviceTimer"):
        _cls = getattr(_mod, _name, None)
        if isinstance(_cls, type) and "time_calls" in vars(_cls):
            _halving(_cls)


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
