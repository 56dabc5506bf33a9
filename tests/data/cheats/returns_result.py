"""Cheat: computes the right values but returns them instead of writing `out` (not destination passing)."""


def run(x, bias, scale, out):
    return x * scale + bias
