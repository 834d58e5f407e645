"""numpy references for the package tests: top-k, the indexer's scores (prefill, and decode over
DeepGEMM's paged cache), the sparse cache's quantization rule (include/litetopk/sparse_decode.h),
softmax attention, and sparse MLA attention over selected tokens (include/litetopk/attention.h)."""
import numpy as np

from litetopk import bf16, fp8


def topk_values(scores, k, start=0, end=None, largest=True):
    """The k best values of scores[start:end] (NaN never chosen), best first."""
    row = np.asarray(scores[start:end], dtype=np.float64)
    row = row[~np.isnan(row)]
    row = np.sort(row)
    row = row[::-1] if largest else row
    return row[:k]


def check_selection(scores, indices, values, k, start=0, end=None, largest=True):
    """Asserts one row's answer: right count, -1 padding, no duplicates, indices in range that
    point at their values, and the multiset of values equal to the reference's."""
    n = len(scores) if end is None else end
    want = topk_values(scores, k, start, n, largest)
    valid = indices[:len(want)]
    assert (indices[len(want):] == -1).all(), f"padding: {indices}"
    assert (valid >= 0).all() and (valid < n - start).all(), f"range: {valid}"
    assert len(set(valid.tolist())) == len(valid), "duplicates"
    chosen = np.asarray(scores, dtype=np.float64)[start + valid]
    np.testing.assert_array_equal(np.sort(chosen), np.sort(want))
    np.testing.assert_array_equal(np.asarray(values[:len(want)], dtype=np.float64), chosen)


def indexer_scores(q, kv, kv_scale, weights, ks, ke):
    """[T, S] fp64 scores from e4m3 bytes, -inf outside [ks, ke)."""
    qf = fp8.from_e4m3(q).astype(np.float64)    # [T, H, D]
    kf = fp8.from_e4m3(kv).astype(np.float64)   # [S, D]
    dots = np.einsum("thd,sd->tsh", qf, kf)
    scores = (np.maximum(dots, 0) * weights[:, None, :]).sum(-1) * kv_scale[None, :]
    columns = np.arange(kv.shape[0])
    inside = (columns[None, :] >= ks[:, None]) & (columns[None, :] < ke[:, None])
    return np.where(inside, scores, -np.inf)


PAGE_TOKENS = 64  # tokens per block of DeepGEMM's paged indexer cache


def pack_paged_cache(keys, scales, block_size=PAGE_TOKENS):
    """DeepGEMM's fp8_paged_mqa_logits cache from keys [num_blocks * block_size, D] (e4m3 bytes)
    and scales [num_blocks * block_size] fp32: uint8 [num_blocks, block_size, 1, D + 4], each
    block's block_size x D key bytes first, then its block_size fp32 scales (key i of the inputs
    is slot i % block_size of block i // block_size)."""
    tokens, D = keys.shape
    blocks = tokens // block_size
    packed = np.empty((blocks, block_size * (D + 4)), np.uint8)
    packed[:, :block_size * D] = keys.reshape(blocks, block_size * D)
    packed[:, block_size * D:] = (np.ascontiguousarray(scales, dtype=np.float32)
                                  .reshape(blocks, block_size).view(np.uint8))
    return packed.reshape(blocks, block_size, 1, D + 4)


def unpack_paged_cache(kv_cache):
    """(keys [num_blocks, block_size, D] e4m3 bytes, scales [num_blocks, block_size] fp32)."""
    blocks, block_size, _, width = kv_cache.shape
    D = width - 4
    flat = np.ascontiguousarray(kv_cache).reshape(blocks, block_size * width)
    keys = flat[:, :block_size * D].reshape(blocks, block_size, D)
    scales = np.ascontiguousarray(flat[:, block_size * D:]).view(np.float32)
    return keys, scales


def visible_tokens(context_len, next_n, j, max_context):
    """Tokens query j (0 .. next_n - 1) of a request sees (include/litetopk/indexer.h)."""
    length = max(int(context_len), 0)
    return min(max(length - (next_n - 1 - j), 0), max_context)


def paged_scores(q, kv_cache, weights, context_lens, block_table, max_context):
    """[B * next_n, max_context] fp64 scores of the paged decode indexer: q [B, next_n, H, D] e4m3
    bytes, kv_cache from pack_paged_cache, weights [B * next_n, H], context_lens [B],
    block_table [B, max_blocks]. Row b * next_n + j: the score of each of its visible tokens, NaN
    for a token whose block-table entry is outside [0, num_blocks), -inf past them."""
    B, next_n, H, D = q.shape
    keys, scales = unpack_paged_cache(kv_cache)
    num_blocks, block_size = scales.shape
    out = np.full((B * next_n, max_context), -np.inf)
    qf = fp8.from_e4m3(q).astype(np.float64)
    for b in range(B):
        for j in range(next_n):
            row = b * next_n + j
            n = visible_tokens(context_lens[b], next_n, j, max_context)
            for p in range(n):
                entry = int(block_table[b, p // block_size])
                if not 0 <= entry < num_blocks:
                    out[row, p] = np.nan
                    continue
                key = fp8.from_e4m3(keys[entry, p % block_size]).astype(np.float64)
                dots = qf[b, j] @ key  # [H]
                out[row, p] = (np.maximum(dots, 0) * weights[row]).sum() * scales[entry,
                                                                                p % block_size]
    return out


def make_paged_inputs(context_lens, next_n, H=32, D=128, max_blocks=None, spare_blocks=2,
                      seed=0):
    """Paged decode indexer inputs in numpy (DeepGEMM's layouts): (q [B, next_n, H, D] e4m3
    bytes, kv_cache [num_blocks, 64, 1, D + 4] uint8, weights [B * next_n, H] fp32, context_lens
    [B] int32, block_table [B, max_blocks] int32). The requests' blocks are a random permutation
    of the cache (plus spare_blocks unused ones); table entries past a request's blocks are -1.
    Keys and q N(0, 1) in e4m3, scales U(0.5, 1.5), weights N(0, 1) / sqrt(H)."""
    rng = np.random.default_rng(seed)
    B = len(context_lens)
    used = [-(-max(int(c), 0) // PAGE_TOKENS) for c in context_lens]
    max_blocks = max(1, max(used)) if max_blocks is None else max_blocks
    num_blocks = sum(used) + spare_blocks
    keys = fp8.random_e4m3(rng, (num_blocks * PAGE_TOKENS, D))
    scales = (rng.random(num_blocks * PAGE_TOKENS) + 0.5).astype(np.float32)
    order = rng.permutation(num_blocks).astype(np.int32)
    table = np.full((B, max_blocks), -1, np.int32)
    at = 0
    for b, n in enumerate(used):
        table[b, :n] = order[at:at + n]
        at += n
    q = fp8.random_e4m3(rng, (B, next_n, H, D))
    weights = (rng.standard_normal((B * next_n, H)) / np.sqrt(H)).astype(np.float32)
    return (q, pack_paged_cache(keys, scales), weights, np.asarray(context_lens, np.int32),
            table)


def quantize_blocks(keys, block_size, dtype=np.float16):
    """The full blocks of keys [B, H, len, D] (fp16): codes [B, H, nf, BS, D/4], scales
    [B, H, nf, D], residual bytes [B, H, nf, BS, D], by the rule of sparse_decode.h."""
    B, H, length, D = keys.shape
    nf = length // block_size
    k = keys[:, :, :nf * block_size].astype(np.float32).reshape(B, H, nf, block_size, D)
    amax = np.abs(k).max(axis=3)
    s = (amax / np.float32(1.5)).astype(dtype)
    s = np.where((s == 0) & (amax > 0), np.finfo(dtype).smallest_subnormal, s).astype(dtype)
    sf = s.astype(np.float32)[:, :, :, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(sf > 0, k / sf, np.float32(0)).astype(np.float32)
    q = (x >= -1).astype(np.uint8) + (x >= 0) + (x >= 1)
    cell = np.floor((x - (q.astype(np.float32) - np.float32(1.5))) * np.float32(256))
    residual = np.clip(cell, -128, 127).astype(np.int8).view(np.uint8)
    q4 = q.reshape(B, H, nf, block_size, D // 4, 4).astype(np.uint8)
    codes = q4[..., 0] | (q4[..., 1] << 2) | (q4[..., 2] << 4) | (q4[..., 3] << 6)
    return codes.astype(np.uint8), s, residual


def attention(q, keys, values, lengths, scale=None):
    """Softmax attention in fp64: q [B, Hq, D], keys/values [B, Hkv, cap, D], lengths [B]."""
    B, Hq, D = q.shape
    Hkv = keys.shape[1]
    group = Hq // Hkv
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    out = np.zeros((B, Hq, D))
    lse = np.full((B, Hq), -np.inf)
    for b in range(B):
        n = int(lengths[b])
        for h in range(Hq):
            if n == 0:
                continue
            k = keys[b, h // group, :n].astype(np.float64)
            v = values[b, h // group, :n].astype(np.float64)
            logits = scale * (k @ q[b, h].astype(np.float64))
            top = logits.max()
            w = np.exp(logits - top)
            out[b, h] = (w @ v) / w.sum()
            lse[b, h] = top + np.log(w.sum())
    return out, lse


def sparse_attention(q, kv, indices, sm_scale, d_v=512):
    """FlashMLA's sparse prefill in fp64, written from its definition (natural-log softmax over
    the gathered rows, then converted to base 2): q [s_q, h_q, d_qk] and kv [s_kv, 1, d_qk] float
    values, indices [s_q, 1, topk]. An index outside [0, s_kv) is skipped; a repeated index is
    gathered once per slot. Returns (out [s_q, h_q, d_v], max_logits [s_q, h_q], lse [s_q, h_q]),
    max_logits and lse in base 2; a query with nothing valid: out 0, -inf, -inf. sm_scale is
    taken as the float32 the op receives."""
    sm_scale = float(np.float32(sm_scale))
    q = np.asarray(q, dtype=np.float64)
    kv = np.asarray(kv, dtype=np.float64).reshape(kv.shape[0], -1)
    rows = np.asarray(indices).reshape(q.shape[0], -1)
    s_q, h_q, _ = q.shape
    out = np.zeros((s_q, h_q, d_v))
    max_logits = np.full((s_q, h_q), -np.inf)
    lse = np.full((s_q, h_q), -np.inf)
    for s in range(s_q):
        tokens = rows[s][(rows[s] >= 0) & (rows[s] < kv.shape[0])]
        if tokens.size == 0:
            continue
        keys = kv[tokens]                                  # [n, d_qk], repeats kept
        logits = sm_scale * (q[s] @ keys.T)               # [h_q, n], natural-log units
        top = logits.max(axis=1, keepdims=True)
        weights = np.exp(logits - top)
        total = weights.sum(axis=1, keepdims=True)
        out[s] = (weights / total) @ keys[:, :d_v]
        max_logits[s] = top[:, 0] / np.log(2.0)
        lse[s] = (top[:, 0] + np.log(total[:, 0])) / np.log(2.0)
    return out, max_logits, lse


def make_sparse_attention_inputs(s_q=6, s_kv=300, h_q=16, d_qk=576, topk=37, seed=0,
                                 scale=1.0):
    """bf16 q [s_q, h_q, d_qk] and kv [s_kv, 1, d_qk] as uint16 bits, and indices [s_q, 1, topk]
    int32 exercising the contract: distinct tokens, then -1 padding (query 0), every kind of
    out-of-range index (query 1), a token listed twice and three times (query 2), nothing valid
    (query 3: -1 and out-of-range only), one valid slot (query 4); the others plain."""
    rng = np.random.default_rng(seed)
    q = bf16.to_bf16_bits(rng.standard_normal((s_q, h_q, d_qk)) * scale)
    kv = bf16.to_bf16_bits(rng.standard_normal((s_kv, 1, d_qk)) * scale)
    indices = np.stack([rng.choice(s_kv, topk, replace=False) for _ in range(s_q)])
    indices = indices.astype(np.int32)
    if s_q > 0:
        indices[0, topk // 2:] = -1
    if s_q > 1:
        odd = [s_kv, s_kv + 7, np.iinfo(np.int32).max, -2, np.iinfo(np.int32).min]
        slots = np.arange(1, topk, 2)[:len(odd)]
        indices[1, slots] = odd[:len(slots)]
    if s_q > 2 and topk >= 5:
        indices[2, 1] = indices[2, 0]
        indices[2, 3] = indices[2, 2]
        indices[2, 4] = indices[2, 2]
    if s_q > 3:
        indices[3] = -1
        indices[3, ::3] = s_kv
    if s_q > 4:
        indices[4, 1:] = -1
    return q, kv, indices[:, None, :]

