"""Honest, with a fixed amount of CPU work a call (a loop of Python steps, not a sleep): its time grows when
another process takes the cores it runs on."""
import torch

STEPS = 60_000


def spend(steps: int = STEPS) -> int:
    acc = 0
    for i in range(steps):
        acc += i & 7
    return acc


def run(x, bias, scale, out):
    spend()
    torch.add(x * scale, bias, out=out)
