"""numpy references for the package tests: top-k, the indexer's scores, the sparse cache's
quantization rule (include/litetopk/sparse_decode.h) and softmax attention."""
import numpy as np

from litetopk import fp8


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


def quantize_blocks(keys, block_size, dtype=np.float16):
    """The full blocks of keys [B, H, len, D] (fp16): codes [B, H, nf, BS, D/4], scales
    [B, H, nf, D], residual bytes [B, H, nf, BS, D], by the rule of sparse_decode.h."""
    B, H, length, D = keys.shape
    nf = length // block_size
    k = keys[:, :, :nf * block_size].astype(np.float32).reshape(B, H, nf, block_size, D)
    amax = np.abs(k).max(axis=3)
    s = (np.float32(0.5) * amax).astype(dtype)
    s = np.where((s == 0) & (amax > 0), np.finfo(dtype).smallest_subnormal, s).astype(dtype)
    sf = s.astype(np.float32)[:, :, :, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(sf > 0, k / sf, np.float32(0)).astype(np.float32)
    q = (x >= -1).astype(np.uint8) + (x >= 0) + (x >= 1)
    residual = fp8.to_e4m3((x - (q.astype(np.float32) - np.float32(1.5))).astype(np.float32))
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
