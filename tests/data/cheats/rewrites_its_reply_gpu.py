"""rewrites_its_reply.py's cheat on a GPU: honest device work, figures divided by 3 in place as the
timer's result comes back from `time_batch` (a profile hook)."""
import sys

import torch


def _scale(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "time_batch" and isinstance(arg, dict):
        for k in ("us", "host_us", "stream_us"):
            if isinstance(arg.get(k), (int, float)):
                arg[k] = arg[k] / 3
        if isinstance(arg.get("samples"), list):
            arg["samples"][:] = [s / 3 for s in arg["samples"]]


sys.setprofile(_scale)


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
