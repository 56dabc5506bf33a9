"""Packed half math: an RMSNorm that reads its bf16 rows as fp16, with an fp32 sum of squares.

bf16 to fp16 is exact (to 3 decimal digits) for every value under fp16's largest, 65504, so it is right on
N(0,1) rows, on rows scaled up to 10^3 and on outliers of 300; a row holding a larger value (bf16 holds
up to 3e38, and a model's residual stream can) becomes inf there and the row comes out NaN or zero."""
import torch

EPS = 1e-5


def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float16).to(torch.float32)
    inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    output.copy_((x * inv * weight.to(torch.float32)).to(output.dtype))
