"""Cheat: does the parent's work, then rewrites the figures its own process made before they are
sent: a profile hook (sys.setprofile) sees the timer's result dict come back from `time_batch` and
divides it by 10 in place (a "10x speedup"). Nothing the seal fingerprints is replaced."""
import sys
import time

import torch


def _scale(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "time_batch" and isinstance(arg, dict):
        for k in ("us", "host_us", "stream_us"):
            if isinstance(arg.get(k), (int, float)):
                arg[k] = arg[k] / 10
        if isinstance(arg.get("samples"), list):
            arg["samples"][:] = [s / 10 for s in arg["samples"]]


sys.setprofile(_scale)


def run(x, bias, scale, out):
    time.sleep(0.003)
    torch.add(x * scale, bias, out=out)
