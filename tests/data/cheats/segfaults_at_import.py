"""Bug: a segmentation fault during import (a null read through ctypes)."""
import ctypes

ctypes.string_at(0)


def run(x, bias, scale, out):
    pass
