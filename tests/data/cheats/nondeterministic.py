"""Not deterministic: out = x * scale + bias plus a tolerance's worth of noise, its sign drawn per call.

Each call alone is within fp32's tolerance of the reference (0.9 of atol + rtol |ref|); two calls on
the same inputs differ by up to twice that: a race whose results wander, as seen from outside."""
import torch


def run(x, bias, scale, out):
    ref = x * scale + bias
    sign = torch.randint(0, 2, ref.shape, dtype=torch.int64).to(ref.dtype) * 2 - 1
    torch.add(ref, 0.9 * (1e-4 + 1e-4 * ref.abs()) * sign, out=out)
