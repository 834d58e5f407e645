"""The package's numpy functions (the library's CPU backend) against numpy references, bad input,
and the package without its extension. Needs no torch and no GPU."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import litetopk
from litetopk import bf16, fp8
from reference import (attention, check_selection, indexer_scores, make_paged_inputs,
                       make_sparse_attention_inputs, paged_scores, quantize_blocks,
                       sparse_attention, visible_tokens)

RNG = np.random.default_rng(1234)


def test_extension_loads():
    info = litetopk.build_info()
    assert info["version"] == litetopk.__version__


# ---------------------------------------------------------------- select_topk

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("algo", ["fast", "reference"])
def test_select_matches_numpy(dtype, largest, algo):
    scores = RNG.standard_normal((7, 3000)).astype(dtype)
    scores[2, ::7] = np.nan
    scores[3, :] = 1.0  # all tied
    k = 50
    indices, values = litetopk.select_topk(scores, k, largest=largest, algo=algo)
    assert indices.shape == (7, k) and indices.dtype == np.int32 and values.dtype == dtype
    for b in range(7):
        check_selection(scores[b], indices[b], values[b], k, largest=largest)


def test_select_ranges_sorted_and_padding():
    scores = RNG.standard_normal((5, 1000)).astype(np.float32)
    starts = np.array([0, 10, 500, 990, 300], np.int32)
    ends = np.array([1000, 20, 900, 1000, 300], np.int32)  # rows 1, 3 short, row 4 empty
    k = 16
    indices, values = litetopk.select_topk(scores, k, starts, ends, sorted=True)
    for b in range(5):
        check_selection(scores[b], indices[b], values[b], k, starts[b], ends[b])
        valid = values[b][indices[b] >= 0]
        assert (np.diff(valid) <= 0).all(), "sorted descending"
        assert np.isnan(values[b][indices[b] < 0]).all(), "padded values are NaN"


def test_select_deterministic_ties():
    scores = np.zeros((2, 100), np.float32)
    indices, _ = litetopk.select_topk(scores, 10, deterministic=True, sorted=True)
    np.testing.assert_array_equal(indices, np.tile(np.arange(10, dtype=np.int32), (2, 1)))


def test_select_strided_rows():
    full = RNG.standard_normal((4, 600)).astype(np.float32)
    view = full[:, :500]  # row stride 600
    indices, values = litetopk.select_topk(view, 8)
    for b in range(4):
        check_selection(view[b], indices[b], values[b], 8)


@pytest.mark.parametrize("call, message", [
    (lambda s: litetopk.select_topk(s, 0), "k must be >= 1"),
    (lambda s: litetopk.select_topk(s.astype(np.float64), 4), "dtype float32 or bfloat16"),
    (lambda s: litetopk.select_topk(s[0], 4), "2-D"),
    (lambda s: litetopk.select_topk(s, 4, row_starts=[0, 1]), "row_starts must be of shape [3]"),
    (lambda s: litetopk.select_topk(s, 4, row_starts=[0, 5, 0], row_ends=[10, 3, 10]),
     "row_starts[1] must be <= row_ends[1]"),
    (lambda s: litetopk.select_topk(s, 4, algo="gpu"), "algo must be one of"),
    (lambda s: litetopk.select_topk(s[:, ::2], 4), "unit stride"),
])
def test_select_bad_input(call, message):
    scores = RNG.standard_normal((3, 100)).astype(np.float32)
    with pytest.raises(ValueError, match=None) as error:
        call(scores)
    assert message in str(error.value)


# ---------------------------------------------------------------- fp8

def test_e4m3_table_and_rounding():
    assert fp8.E4M3_VALUES[0x38] == 1.0 and fp8.E4M3_VALUES[0x7E] == 448.0
    assert fp8.E4M3_VALUES[0x01] == 2.0 ** -9 and fp8.E4M3_VALUES[0xB8] == -1.0
    finite = np.array([b for b in range(256) if b not in (0x7F, 0xFF)], np.uint8)
    np.testing.assert_array_equal(fp8.to_e4m3(fp8.from_e4m3(finite)), finite)
    assert fp8.to_e4m3(1000.0) == 0x7E and fp8.to_e4m3(-1000.0) == 0xFE
    assert fp8.to_e4m3(1.0625) == 0x38  # halfway between 1.0 (even) and 1.125
    assert fp8.to_e4m3(1.1875) == 0x3A  # halfway between 1.125 and 1.25 (even)


# ---------------------------------------------------------------- indexer

def indexer_inputs(T=6, S=400, H=32, D=128, seed=0):
    rng = np.random.default_rng(seed)
    q = fp8.random_e4m3(rng, (T, H, D))
    kv = fp8.random_e4m3(rng, (S, D))
    kv_scale = (rng.random(S) + 0.5).astype(np.float32)
    weights = (rng.standard_normal((T, H)) / np.sqrt(H)).astype(np.float32)
    ks = np.array([0, 0, 50, 100, 390, 10][:T], np.int32)
    ke = np.array([400, 30, 350, 101, 400, 10][:T], np.int32)  # one query has an empty range
    return q, kv, kv_scale, weights, ks, ke


def test_indexer_logits_match_numpy():
    inputs = indexer_inputs()
    logits = litetopk.indexer_logits(*inputs)
    want = indexer_scores(*inputs)
    assert logits.shape == want.shape and logits.dtype == np.float32
    np.testing.assert_array_equal(np.isinf(logits), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(logits[finite], want[finite], rtol=1e-6, atol=1e-6)


def test_indexer_topk_matches_logits_selection():
    inputs = indexer_inputs()
    ks, ke = inputs[4], inputs[5]
    k = 20
    indices, values = litetopk.indexer_topk(*inputs, k)
    logits = litetopk.indexer_logits(*inputs)
    for t in range(len(ks)):
        check_selection(logits[t], indices[t], values[t], k, ks[t], ke[t])


@pytest.mark.parametrize("change, message", [
    (lambda a: {**a, "kv_scale": a["kv_scale"][:-1]}, "kv_scale must be of shape [400]"),
    (lambda a: {**a, "weights": a["weights"][:, :16]}, "weights must be of shape [6, 32]"),
    (lambda a: {**a, "q": a["q"].astype(np.float32)}, "q must be of dtype float8_e4m3fn or uint8"),
    (lambda a: {**a, "k": 0}, "k must be"),
])
def test_indexer_bad_input(change, message):
    names = ("q", "kv", "kv_scale", "weights", "cu_seqlen_ks", "cu_seqlen_ke")
    arguments = change(dict(zip(names, indexer_inputs()), k=4))
    with pytest.raises(ValueError) as error:
        litetopk.indexer_topk(**arguments)
    assert message in str(error.value)


# ---------------------------------------------------------------- paged decode indexer

# A ragged batch: a long context, an empty one, one shorter than k (40), one across a block edge.
PAGED_CONTEXTS = [300, 0, 5, 129, 70]


def paged_case(next_n, seed=0):
    """Inputs with two block-table entries outside the cache (request 0's third block, request
    3's first) and max_context 256, which cuts request 0 (300 tokens)."""
    q, kv_cache, weights, context_lens, table = make_paged_inputs(PAGED_CONTEXTS, next_n,
                                                                  max_blocks=6, seed=seed)
    num_blocks = kv_cache.shape[0]
    table[0, 2] = num_blocks + 3
    table[3, 0] = -7
    return (q, kv_cache, weights, context_lens, table), 256


@pytest.mark.parametrize("next_n", [1, 2, 3, 4])
def test_paged_logits_match_numpy(next_n):
    inputs, max_context = paged_case(next_n, seed=next_n)
    logits = litetopk.indexer_logits_paged(*inputs, max_context)
    want = paged_scores(*inputs, max_context)
    assert logits.shape == (len(PAGED_CONTEXTS) * next_n, max_context)
    assert logits.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(logits), np.isnan(want))
    np.testing.assert_array_equal(np.isneginf(logits), np.isneginf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(logits[finite], want[finite], rtol=1e-6, atol=1e-6)
    assert np.isnan(logits[0:next_n, 128:192]).all()  # request 0's out-of-range block
    assert np.isneginf(logits[next_n:2 * next_n]).all()  # the empty request


@pytest.mark.parametrize("next_n", [1, 2, 3, 4])
def test_paged_topk_matches_reference(next_n):
    inputs, max_context = paged_case(next_n, seed=10 + next_n)
    k = 40
    indices, values = litetopk.indexer_topk_paged(*inputs, max_context, k)
    assert indices.shape == values.shape == (len(PAGED_CONTEXTS) * next_n, k)
    logits = litetopk.indexer_logits_paged(*inputs, max_context)
    want = paged_scores(*inputs, max_context)
    for b, context in enumerate(PAGED_CONTEXTS):
        for j in range(next_n):
            row = b * next_n + j
            n = visible_tokens(context, next_n, j, max_context)
            # Selection over the row's visible tokens (NaN, the out-of-range blocks, never).
            check_selection(logits[row], indices[row], values[row], k, 0, n)
            chosen = indices[row][indices[row] >= 0]
            assert not np.isnan(want[row, chosen]).any(), "an out-of-range block's token"
            selectable = np.count_nonzero(np.isfinite(want[row, :n]))
            assert len(chosen) == min(k, selectable)


def test_paged_topk_row_shorter_than_k_and_empty():
    inputs, max_context = paged_case(2, seed=3)
    indices, _ = litetopk.indexer_topk_paged(*inputs, max_context, 40)
    # Request 1 is empty, request 2 has 5 tokens (its queries see 4 and 5).
    assert (indices[2:4] == -1).all()
    np.testing.assert_array_equal(np.sort(indices[4, :4]), np.arange(4))
    assert (indices[4, 4:] == -1).all()
    np.testing.assert_array_equal(np.sort(indices[5, :5]), np.arange(5))
    # Request 3's first block is out of range: only its tokens 64 .. 128 can be chosen.
    chosen = indices[6:8][indices[6:8] >= 0]
    assert chosen.min() >= 64 and len(chosen) == 80


@pytest.mark.parametrize("change, message", [
    (lambda a: {**a, "q": a["q"][0]}, "q must be a 4-D array [batch, next_n, num_heads, "
                                      "head_dim]"),
    (lambda a: {**a, "kv_cache": a["kv_cache"][..., :-1]},
     "kv_cache must be of shape [13, 64, 1, 132]"),
    (lambda a: {**a, "weights": a["weights"][:-1]}, "weights must be of shape [10, 32]"),
    (lambda a: {**a, "context_lens": a["context_lens"][:2]}, "context_lens must be of shape [5]"),
    (lambda a: {**a, "block_table": a["block_table"][:3]}, "block_table must be of shape [5, 6]"),
    (lambda a: {**a, "block_table": a["block_table"][0]}, "block_table must be a 2-D array"),
    (lambda a: {**a, "q": a["q"].astype(np.float32)}, "q must be of dtype float8_e4m3fn or uint8"),
    (lambda a: {**a, "k": 0}, "k must be in [1, 8192], got 0"),
    (lambda a: {**a, "max_context": 6 * 64 + 1}, "max_context must be <= max_blocks * block_size"),
    (lambda a: {**a, "q": np.zeros((5, 5, 32, 128), np.uint8),
                "weights": np.zeros((25, 32), np.float32)}, "next_n must be in [1, 4], got 5"),
])
def test_paged_bad_input(change, message):
    inputs, max_context = paged_case(2)
    names = ("q", "kv_cache", "weights", "context_lens", "block_table")
    arguments = change(dict(zip(names, inputs), max_context=max_context, k=4))
    with pytest.raises(ValueError) as error:
        litetopk.indexer_topk_paged(**arguments)
    assert message in str(error.value)


# ---------------------------------------------------------------- sparse decoding

def dense_inputs(batch=2, heads=2, length=300, capacity=384, seed=3):
    rng = np.random.default_rng(seed)
    keys = np.zeros((batch, heads, capacity, 128), np.float16)
    values = np.zeros_like(keys)
    keys[:, :, :length] = rng.standard_normal((batch, heads, length, 128)) * 2
    values[:, :, :length] = rng.standard_normal((batch, heads, length, 128))
    lengths = np.array([length, length - 137][:batch], np.int32)
    return keys, values, lengths


def test_sparse_cache_quantization_is_the_rule():
    keys, values, lengths = dense_inputs()
    cache = litetopk.SparseKvCache.empty(2, 2, max_blocks=3, block_size=128)
    litetopk.sparse_kv_from_dense(cache, keys, values, lengths)
    np.testing.assert_array_equal(cache.lengths, lengths)
    for b, length in enumerate(lengths):
        nf = length // 128
        codes, scales, residuals = quantize_blocks(keys[b:b + 1, :, :length], 128)
        np.testing.assert_array_equal(cache.key_codes[b, :, :nf], codes[0])
        np.testing.assert_array_equal(cache.key_scales[b, :, :nf], scales[0])
        np.testing.assert_array_equal(cache.key_residuals[b, :, :nf], residuals[0])
        tail = length - nf * 128
        np.testing.assert_array_equal(cache.tail_keys[b, :, :tail], keys[b, :, nf * 128:length])
    rebuilt, _, _ = litetopk.sparse_kv_rebuild(cache)
    for b, length in enumerate(lengths):
        error = rebuilt[b, :, :length] - keys[b, :, :length].astype(np.float32)
        assert np.abs(error).max() <= np.abs(keys).max() / 16


def test_sparse_kv_append_equals_conversion():
    keys, values, lengths = dense_inputs(length=256)  # lengths 256 and 119
    before = lengths - 1
    cache = litetopk.SparseKvCache.empty(2, 2, max_blocks=3)
    litetopk.sparse_kv_from_dense(cache, keys, values, before)
    at = np.arange(2)
    litetopk.sparse_kv_append(cache, keys[at, :, before], values[at, :, before])
    whole = litetopk.SparseKvCache.empty(2, 2, max_blocks=3)
    litetopk.sparse_kv_from_dense(whole, keys, values, lengths)
    np.testing.assert_array_equal(cache.lengths, lengths)
    np.testing.assert_array_equal(cache.key_codes[:, :, :2], whole.key_codes[:, :, :2])
    np.testing.assert_array_equal(cache.key_residuals[:, :, :2], whole.key_residuals[:, :, :2])


def test_dense_and_sparse_decode():
    keys, values, lengths = dense_inputs()
    rng = np.random.default_rng(5)
    q = (rng.standard_normal((2, 8, 128)) * 0.3).astype(np.float16)
    out, lse = litetopk.dense_decode(q, keys, values, lengths)
    want, want_lse = attention(q, keys, values, lengths)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5)

    cache = litetopk.SparseKvCache.empty(2, 2, max_blocks=3)
    litetopk.sparse_kv_from_dense(cache, keys, values, lengths)
    rebuilt, rebuilt_values, _ = litetopk.sparse_kv_rebuild(cache)
    everything, _, kept, fraction = litetopk.sparse_decode(cache, q, delta=np.inf)
    assert fraction == 1.0 and kept[0, :, :2].all()
    exact, _ = attention(q, rebuilt, rebuilt_values, lengths)
    np.testing.assert_allclose(everything, exact, rtol=1e-4, atol=1e-5)
    sparse, _, _, _ = litetopk.sparse_decode(cache, q, delta=0.0)
    assert np.isfinite(sparse).all()


def test_decode_bad_input():
    keys, values, lengths = dense_inputs()
    q = np.zeros((2, 8, 128), np.float32)
    with pytest.raises(ValueError, match="q must be of dtype float16"):
        litetopk.dense_decode(q, keys, values, lengths)
    with pytest.raises(ValueError, match="softmax_scale"):
        litetopk.dense_decode(q.astype(np.float16), keys, values, lengths, softmax_scale=-1.0)
    cache = litetopk.SparseKvCache.empty(2, 2, max_blocks=3)
    with pytest.raises(ValueError, match="lengths must be of shape"):
        litetopk.sparse_kv_from_dense(cache, keys, values, lengths[:1])


# ---------------------------------------------------------------- sparse attention

def test_bf16_bits_round_to_nearest_even():
    x = np.array([1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -20,
                  -2.5, 0.0, -0.0, np.inf, -np.inf, 3.4e38, 1e-40], np.float32)
    bits = bf16.to_bf16_bits(x)
    np.testing.assert_array_equal(
        bits, np.array([0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x0000, 0x8000, 0x7F80, 0xFF80,
                        0x7F80, 0x0001], np.uint16))
    assert np.isnan(bf16.from_bf16_bits(bf16.to_bf16_bits(np.float32(np.nan))))
    assert bf16.from_bf16_bits(bits).dtype == np.float32
    np.testing.assert_array_equal(bf16.to_bf16_bits(bf16.from_bf16_bits(bits)), bits)


def check_sparse_attention(got, want):
    """litetopk's (out, max_logits, lse) against the fp64 reference's: out within half a bf16 ulp
    (its last rounding), the stats within fp32 rounding, -inf exactly where the reference has
    it."""
    out, max_logits, lse = got
    want_out, want_max, want_lse = want
    assert out.shape == want_out.shape and out.dtype == np.float32
    error = np.abs(out.astype(np.float64) - want_out)
    assert (error <= 2.0 ** -8 * np.abs(want_out) + 1e-12).all(), error.max()
    for name, g, w in (("max_logits", max_logits, want_max), ("lse", lse, want_lse)):
        assert g.dtype == np.float32 and g.shape == w.shape, name
        np.testing.assert_array_equal(np.isneginf(g), np.isneginf(w), err_msg=name)
        finite = np.isfinite(w)
        np.testing.assert_allclose(g[finite], w[finite], rtol=2e-7, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("h_q,d_qk", [(16, 576), (32, 576), (64, 576), (128, 576), (16, 512),
                                      (64, 512)])
def test_sparse_attention_matches_numpy(h_q, d_qk):
    q, kv, indices = make_sparse_attention_inputs(h_q=h_q, d_qk=d_qk, topk=37, seed=h_q + d_qk)
    scale = 1.0 / np.sqrt(d_qk)
    got = litetopk.sparse_attention(q, kv, indices, scale)
    want = sparse_attention(bf16.from_bf16_bits(q), bf16.from_bf16_bits(kv), indices, scale)
    check_sparse_attention(got, want)
    out, max_logits, lse = got
    assert (out[3] == 0).all() and np.isneginf(max_logits[3]).all() and np.isneginf(lse[3]).all()
    assert np.isfinite(lse[[0, 1, 2, 4, 5]]).all()
    # One valid slot: its value row, and lse = max_logits = its logit.
    token = indices[4, 0, 0]
    np.testing.assert_array_equal(out[4], np.broadcast_to(bf16.from_bf16_bits(kv[token, 0, :512]),
                                                          out[4].shape))
    np.testing.assert_array_equal(lse[4], max_logits[4])


def test_sparse_attention_hand_cases():
    """Equal logits (q = 0): out is the mean of the slots' value rows, a repeated token weighed
    once per slot, lse = log2 of the valid slot count; a scale of 0 gives the same."""
    s_kv, d_qk = 5, 576
    kv = np.zeros((s_kv, 1, d_qk), np.float32)
    kv[:, 0, :512] = np.arange(s_kv, dtype=np.float32)[:, None] * 3.0  # row t holds 3t
    q = np.zeros((2, 16, d_qk), np.float32)
    indices = np.array([[[1, 3, 3, -1, s_kv]], [[0, 4, 2, 2, 2]]], np.int32)
    out, max_logits, lse = litetopk.sparse_attention(q, kv, indices, 0.5)
    np.testing.assert_array_equal(out[0], np.full((16, 512), (3 + 9 + 9) / 3, np.float32))
    np.testing.assert_array_equal(out[1], np.full((16, 512), (0 + 12 + 3 * 6) / 5, np.float32))
    np.testing.assert_array_equal(max_logits, np.zeros((2, 16), np.float32))
    np.testing.assert_allclose(lse[0], np.log2(3), rtol=1e-7)
    np.testing.assert_allclose(lse[1], np.log2(5), rtol=1e-7)
    # Logits two apart in base 2 weigh 4:1: q . k = 2 / log2(e) at scale 1 on row 1.
    kv2 = np.zeros((2, 1, d_qk), np.float32)
    kv2[0, 0, 0], kv2[1, 0, 0] = 0.0, 1.0
    kv2[0, 0, 1], kv2[1, 0, 1] = 5.0, 10.0   # values: 5 and 10
    q2 = np.zeros((1, 16, d_qk), np.float32)
    q2[0, :, 0] = 1.0
    out2, max2, lse2 = litetopk.sparse_attention(q2, kv2, np.array([[[0, 1]]], np.int32),
                                                 2.0 / np.log2(np.e))
    np.testing.assert_allclose(max2, 2.0, rtol=1e-6)
    np.testing.assert_allclose(lse2, np.log2(5.0), rtol=1e-6)
    np.testing.assert_allclose(out2[0, :, 1], (5.0 * 1 + 10.0 * 4) / 5, rtol=2.0 ** -8)


def test_sparse_attention_input_forms():
    q, kv, indices = make_sparse_attention_inputs(s_q=5, h_q=32, topk=20, seed=3)
    want = litetopk.sparse_attention(q, kv, indices, 0.05)
    # float32 holding bf16 values, 2-D indices, uint16 output bits.
    same = litetopk.sparse_attention(bf16.from_bf16_bits(q), bf16.from_bf16_bits(kv),
                                     indices[:, 0, :], 0.05)
    for got, w in zip(same, want):
        np.testing.assert_array_equal(got, w)
    bits, _, _ = litetopk.sparse_attention(q, kv, indices, 0.05, out_dtype=np.uint16)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bf16.from_bf16_bits(bits), want[0])
    # float32 values are rounded to bf16 first.
    rough = bf16.from_bf16_bits(q) * np.float32(1.0 + 2.0 ** -12)
    for got, w in zip(litetopk.sparse_attention(rough, kv, indices, 0.05), want):
        np.testing.assert_array_equal(got, w)
    # Arrays at addresses that are not 16-byte aligned are copied.
    buffer = np.empty(q.size + 1, np.uint16)
    shifted = buffer[1:].reshape(q.shape)
    shifted[...] = q
    for got, w in zip(litetopk.sparse_attention(shifted, kv, indices, 0.05), want):
        np.testing.assert_array_equal(got, w)


def test_sparse_attention_empty_shapes():
    q, kv, indices = make_sparse_attention_inputs(s_q=3, h_q=16, topk=8, seed=4)
    out, max_logits, lse = litetopk.sparse_attention(q, kv[:0], indices, 0.1)  # s_kv = 0
    assert (out == 0).all() and np.isneginf(max_logits).all() and np.isneginf(lse).all()
    out, max_logits, lse = litetopk.sparse_attention(q[:0], kv, indices[:0], 0.1)  # s_q = 0
    assert out.shape == (0, 16, 512) and max_logits.shape == (0, 16) and lse.shape == (0, 16)


@pytest.mark.parametrize("change,message", [
    (lambda a: dict(a, q=a["q"].astype(np.float64)), "q must be bf16 bits"),
    (lambda a: dict(a, q=a["q"][:, :12]), "h_q must be 16, 32, 64 or 128, got 12"),
    (lambda a: dict(a, q=a["q"][:, :, :512]), r"kv must be of shape \[300, 1, 512\]"),
    (lambda a: dict(a, kv=a["kv"][:, 0]), r"kv must be a 3-D array \[s_kv, 1, d_qk\]"),
    (lambda a: dict(a, indices=a["indices"][:4]), r"indices must be of shape \[6, 1, 37\]"),
    (lambda a: dict(a, indices=a["indices"][:, :, :0]), "topk must be in"),
    (lambda a: dict(a, sm_scale=np.inf), "sm_scale must be finite"),
    (lambda a: dict(a, d_v=256), "d_v must be 512, got 256"),
    (lambda a: dict(a, out_dtype=np.float16), "out_dtype must be float32 or uint16"),
])
def test_sparse_attention_bad_input(change, message):
    q, kv, indices = make_sparse_attention_inputs()
    args = change(dict(q=q, kv=kv, indices=indices, sm_scale=0.1))
    with pytest.raises(ValueError, match=message):
        litetopk.sparse_attention(**args)


def test_sparse_attention_algo_names():
    """The problem's algo is the extension's SparseAttentionAlgo, the C++ enum itself (its
    names are the library's). The CPU reference ignores the algorithm: every member gives the
    numpy function's answer, though union-packed is still refused where it does not apply
    (h_q 64), as on the GPU; a name that is no member is refused naming the members."""
    from litetopk import _problems as P
    from litetopk._ext import ext
    names = "auto, per-query, union-packed, plain"
    assert ", ".join(ext().SparseAttentionAlgo.__members__) == names
    for h_q in (16, 64):
        q, kv, indices = make_sparse_attention_inputs(s_q=4, h_q=h_q, topk=12, seed=11)
        want = litetopk.sparse_attention(q, kv, indices, 0.05, out_dtype=np.uint16)
        arrays = [np.empty((4, h_q, 512), np.uint16), np.empty((4, h_q), np.float32),
                  np.empty((4, h_q), np.float32)]
        problem = P.sparse_attention_args(*(P.numpy_view(x) for x in (q, kv, indices)), 0.05,
                                          *(P.numpy_view(x) for x in arrays), bf16=("uint16",))
        assert problem.algo == ext().SparseAttentionAlgo.auto
        for algo in ext().SparseAttentionAlgo:
            for x in arrays:
                x.fill(7)
            problem.algo = algo
            if algo.name == "union-packed" and h_q == 64:
                with pytest.raises(ValueError, match="algo union-packed needs h_q 16 or 32"):
                    ext().sparse_attention_cpu(problem)
                continue
            ext().sparse_attention_cpu(problem)
            for got, w in zip(arrays, want):
                np.testing.assert_array_equal(got, w)
        for bad in ("bogus", "Auto", "", "union_packed"):
            with pytest.raises(ValueError, match=f"algo must be one of {names}, got '{bad}'"):
                P.sparse_attention_args(*(P.numpy_view(x) for x in (q, kv, indices)), 0.05,
                                        P.numpy_view(arrays[0]), bf16=("uint16",), algo=bad)


# ---------------------------------------------------------------- without the extension

def test_import_without_extension_is_clear(tmp_path):
    """A copy of the package without _C imports; the first call raises ImportError saying so."""
    source = os.path.dirname(litetopk.__file__)
    shutil.copytree(source, tmp_path / "litetopk",
                    ignore=shutil.ignore_patterns("_C*", "__pycache__"))
    code = ("import numpy, litetopk\n"
            "assert not litetopk.extension_available()\n"
            "try:\n"
            "    litetopk.select_topk(numpy.zeros((1, 4), numpy.float32), 1)\n"
            "except ImportError as error:\n"
            "    print(error)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "compiled extension could not be loaded" in result.stdout
    assert "pip install ." in result.stdout
