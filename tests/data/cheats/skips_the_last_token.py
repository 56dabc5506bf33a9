"""A DSA top-k indexer one short at the end of each row: it scores tokens 0 .. seq_len - 2, never the last
(a loop bound of seq_len - 1). Right wherever the last token ranks below the 2048th (the ranks after it
shift by one, inside the tie band) or the row has at most 2048 tokens. Plain torch, one row at a time."""
import torch

PAGE, DIM, TOPK = 64, 128, 2048


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices):
    p = k_index_cache_fp8.shape[0]
    flat = k_index_cache_fp8.reshape(p, PAGE * (DIM + 4)).view(torch.uint8)
    vals = flat[:, :PAGE * DIM].contiguous().view(torch.float8_e4m3fn).float().reshape(p * PAGE, DIM)
    keys = vals * flat[:, PAGE * DIM:].contiguous().view(torch.float32).reshape(p * PAGE, 1)
    topk_indices.fill_(-1)
    for r in range(seq_lens.numel()):
        n = int(seq_lens[r])
        pos = torch.arange(n)
        ids = block_table[r, pos // PAGE].long() * PAGE + pos % PAGE
        if n > TOPK:
            ids = ids[:-1]  # the bug
            s = (torch.relu(q_index_fp8[r].float() @ keys[ids].T) * weights[r, :, None].float()).sum(0)
            ids = ids[torch.topk(s, TOPK).indices]
        topk_indices[r, :ids.numel()] = ids.to(torch.int32)
