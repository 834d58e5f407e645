"""The numpy functions' door (litetopk.cpu, litetopk.ops without torch, where the package finds
its extension): byte order, integer and flag arguments, required arguments, empty batches and
output sizes, each with the error that names the argument. Needs no torch and no GPU."""
import os
import subprocess
import sys

import numpy as np
import pytest

import litetopk
from litetopk import cpu
from reference import make_paged_inputs, make_sparse_attention_inputs

RNG = np.random.default_rng(2020)
PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python")


def indexer_args(T=4, S=300, H=32, seed=0):
    rng = np.random.default_rng(seed)
    return dict(q=litetopk.fp8.random_e4m3(rng, (T, H, 128)),
                kv=litetopk.fp8.random_e4m3(rng, (S, 128)),
                kv_scale=(rng.random(S) + 0.5).astype(np.float32),
                weights=(rng.standard_normal((T, H)) / np.sqrt(H)).astype(np.float32),
                cu_seqlen_ks=np.zeros(T, np.int32), cu_seqlen_ke=np.full(T, S, np.int32))


def paged_args(contexts=(200, 70), next_n=1):
    q, kv_cache, weights, context_lens, table = make_paged_inputs(list(contexts), next_n,
                                                                  max_blocks=4, seed=1)
    return dict(q=q, kv_cache=kv_cache, weights=weights, context_lens=context_lens,
                block_table=table, max_context=256)


def dense_args(batch=2, heads=2, capacity=256, seed=3):
    rng = np.random.default_rng(seed)
    keys = rng.standard_normal((batch, heads, capacity, 128)).astype(np.float16)
    values = rng.standard_normal((batch, heads, capacity, 128)).astype(np.float16)
    q = (rng.standard_normal((batch, 4 * heads, 128)) * 0.3).astype(np.float16)
    return q, keys, values, np.array([capacity, capacity - 100][:batch], np.int32)


# ---------------------------------------------------------------- byte order

@pytest.mark.parametrize("dtype", [">f4", ">f2", "<f4", "<f2"])
def test_select_any_byte_order(dtype):
    scores = RNG.standard_normal((3, 500)).astype(dtype)
    native = scores.astype(np.dtype(dtype).newbyteorder("="))
    indices, values = litetopk.select_topk(scores, 3, sorted=True)
    want_indices, want_values = litetopk.select_topk(native, 3, sorted=True)
    np.testing.assert_array_equal(indices, want_indices)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(values[:, 0], native.max(axis=1))
    assert values.dtype.isnative


def test_decode_and_indexer_any_byte_order():
    q, keys, values, lengths = dense_args()
    want = litetopk.dense_decode(q, keys, values, lengths)
    swapped = [x.astype(x.dtype.newbyteorder(">")) for x in (q, keys, values, lengths)]
    for got, w in zip(litetopk.dense_decode(*swapped), want):
        np.testing.assert_array_equal(got, w)
    args = indexer_args()
    want = litetopk.indexer_topk(**args, k=8)
    args = {name: x.astype(x.dtype.newbyteorder(">")) for name, x in args.items()}
    for got, w in zip(litetopk.indexer_topk(**args, k=8), want):
        np.testing.assert_array_equal(got, w)
    q, kv, indices = make_sparse_attention_inputs(s_q=2, h_q=16, topk=8, seed=2)
    want = litetopk.sparse_attention(q, kv, indices, 0.1)
    swapped = [x.astype(x.dtype.newbyteorder(">")) for x in (q, kv, indices)]
    for got, w in zip(litetopk.sparse_attention(*swapped, 0.1), want):
        np.testing.assert_array_equal(got, w)


def test_cache_in_foreign_byte_order_is_refused():
    cache = litetopk.SparseKvCache.empty(1, 2, max_blocks=2)
    cache.values = cache.values.astype(">f2")
    q, keys, values, lengths = dense_args(batch=1)
    with pytest.raises(ValueError, match="values must be in native byte order, got dtype >f2"):
        litetopk.sparse_kv_from_dense(cache, keys, values, lengths)


# ---------------------------------------------------------------- integers and flags

NOT_INTEGERS = [2.7, 2.0, np.float32(3.0), True, np.bool_(True), "3", None]


@pytest.mark.parametrize("k", NOT_INTEGERS)
def test_k_must_be_an_integer(k):
    scores = RNG.standard_normal((2, 50)).astype(np.float32)
    with pytest.raises(TypeError, match="k must be an integer, got"):
        litetopk.select_topk(scores, k)
    with pytest.raises(TypeError, match="k must be an integer, got"):
        litetopk.indexer_topk(**indexer_args(), k=k)
    with pytest.raises(TypeError, match="k must be an integer, got"):
        litetopk.indexer_topk_paged(**paged_args(), k=k)


def test_numpy_integers_are_integers():
    scores = RNG.standard_normal((2, 50)).astype(np.float32)
    for k in (np.int64(4), np.int32(4), np.uint8(4), np.array(4)):
        assert litetopk.select_topk(scores, k)[0].shape == (2, 4)
    args = paged_args()
    args["max_context"] = np.int64(args["max_context"])
    assert litetopk.indexer_topk_paged(**args, k=np.int16(5))[0].shape == (2, 5)


@pytest.mark.parametrize("name, value", [
    ("max_context", 255.5), ("max_context", 256.0), ("max_context", True)])
def test_max_context_must_be_an_integer(name, value):
    args = dict(paged_args(), **{name: value})
    with pytest.raises(TypeError, match=f"{name} must be an integer"):
        litetopk.indexer_topk_paged(**args, k=4)
    with pytest.raises(TypeError, match=f"{name} must be an integer"):
        litetopk.indexer_logits_paged(**args)


@pytest.mark.parametrize("name", ["row_starts", "row_ends"])
@pytest.mark.parametrize("value, error", [
    ([0.5, 1.2], TypeError), (np.array([0.0, 1.0]), TypeError),
    (np.array([True, False]), TypeError), (np.array([0, 2**33]), ValueError)])
def test_ranges_must_be_int32(name, value, error):
    scores = RNG.standard_normal((2, 50)).astype(np.float32)
    match = (f"{name} must be an integer array" if error is TypeError
             else f"{name} must hold int32 values")
    with pytest.raises(error, match=match):
        litetopk.select_topk(scores, 4, **{name: value})


@pytest.mark.parametrize("name", ["cu_seqlen_ks", "cu_seqlen_ke"])
def test_key_ranges_must_be_integers(name):
    args = indexer_args()
    args[name] = args[name].astype(np.float32) + 0.5
    with pytest.raises(TypeError, match=f"{name} must be an integer array"):
        litetopk.indexer_topk(**args, k=4)
    with pytest.raises(TypeError, match=f"{name} must be an integer array"):
        litetopk.indexer_logits(**args)


@pytest.mark.parametrize("name", ["context_lens", "block_table"])
def test_paged_index_arrays_must_be_integers(name):
    args = paged_args()
    args[name] = args[name].astype(np.float64)
    with pytest.raises(TypeError, match=f"{name} must be an integer array"):
        litetopk.indexer_topk_paged(**args, k=4)


def test_other_integer_arguments():
    q, kv, indices = make_sparse_attention_inputs(s_q=2, h_q=16, topk=8, seed=2)
    with pytest.raises(TypeError, match="indices must be an integer array"):
        litetopk.sparse_attention(q, kv, indices.astype(np.float32), 0.1)
    with pytest.raises(TypeError, match="d_v must be an integer"):
        litetopk.sparse_attention(q, kv, indices, 0.1, d_v=512.0)
    with pytest.raises(TypeError, match="sm_scale must be a number"):
        litetopk.sparse_attention(q, kv, indices, "0.1")
    with pytest.raises(TypeError, match="max_blocks must be an integer"):
        litetopk.SparseKvCache.empty(1, 2, max_blocks=2.5)
    with pytest.raises(TypeError, match="batch must be an integer"):
        litetopk.SparseKvCache.empty(True, 2, max_blocks=2)
    cache = litetopk.SparseKvCache.empty(1, 2, max_blocks=2)
    with pytest.raises(TypeError, match="capacity must be an integer"):
        litetopk.sparse_kv_rebuild(cache, capacity=100.0)
    with pytest.raises(TypeError, match="delta must be a number"):
        litetopk.sparse_decode(cache, np.zeros((1, 4, 128), np.float16), delta="5")
    q, keys, values, lengths = dense_args()
    with pytest.raises(TypeError, match="lengths must be an integer array"):
        litetopk.dense_decode(q, keys, values, lengths.astype(np.float32))
    with pytest.raises(TypeError, match="num_threads must be an integer"):
        litetopk.select_topk(np.zeros((1, 8), np.float32), 2, num_threads=1.5)


@pytest.mark.parametrize("name", ["largest", "sorted", "deterministic"])
@pytest.mark.parametrize("value", ["no", "False", 0, 1, None, 0.0])
def test_flags_must_be_bools(name, value):
    scores = RNG.standard_normal((2, 50)).astype(np.float32)
    with pytest.raises(TypeError, match=f"{name} must be True or False, got {value!r}"):
        litetopk.select_topk(scores, 4, **{name: value})


def test_numpy_bools_are_flags():
    scores = RNG.standard_normal((2, 50)).astype(np.float32)
    _, smallest = litetopk.select_topk(scores, 1, largest=np.bool_(False))
    np.testing.assert_array_equal(smallest[:, 0], scores.min(axis=1))


# ---------------------------------------------------------------- required arguments

@pytest.mark.parametrize("name", ["q", "kv", "kv_scale", "weights", "cu_seqlen_ks",
                                  "cu_seqlen_ke"])
def test_indexer_names_a_missing_argument(name):
    args = dict(indexer_args(), **{name: None})
    with pytest.raises(TypeError, match=f"{name} is required"):
        litetopk.indexer_topk(**args, k=4)
    with pytest.raises(TypeError, match=f"{name} is required"):
        litetopk.indexer_logits(**args)


@pytest.mark.parametrize("name", ["q", "kv_cache", "weights", "context_lens", "block_table"])
def test_paged_names_a_missing_argument(name):
    args = dict(paged_args(), **{name: None})
    with pytest.raises(TypeError, match=f"{name} is required"):
        litetopk.indexer_topk_paged(**args, k=4)


def test_other_missing_arguments():
    with pytest.raises(TypeError, match="scores is required"):
        litetopk.select_topk(None, 4)
    q, kv, indices = make_sparse_attention_inputs(s_q=2, h_q=16, topk=8, seed=2)
    for name in ("q", "kv", "indices", "sm_scale"):
        args = dict(q=q, kv=kv, indices=indices, sm_scale=0.1)
        args[name] = None
        with pytest.raises(TypeError, match=f"{name} (is required|must be a number)"):
            litetopk.sparse_attention(**args)
    q, keys, values, lengths = dense_args()
    for position, name in enumerate(("q", "keys", "values", "lengths")):
        args = [q, keys, values, lengths]
        args[position] = None
        with pytest.raises(TypeError, match=f"{name} is required"):
            litetopk.dense_decode(*args)
    with pytest.raises(TypeError, match="cache is required"):
        litetopk.sparse_decode(None, q)
    with pytest.raises(TypeError, match="needs its block_table"):
        litetopk.SparseKvCache.empty(1, 2, max_blocks=2, num_pages=4)


# ---------------------------------------------------------------- empty batches

def test_empty_batches_give_empty_results():
    indices, values = litetopk.select_topk(np.zeros((0, 10), np.float32), 3)
    assert indices.shape == (0, 3) and values.shape == (0, 3) and indices.dtype == np.int32
    indices, _ = litetopk.select_topk(np.zeros((0, 10), np.float16), 3, [], [])
    assert indices.shape == (0, 3)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):  # still checked
        litetopk.select_topk(np.zeros((0, 10), np.float32), 0)

    args = indexer_args(T=0)
    assert litetopk.indexer_logits(**args).shape == (0, 300)
    assert litetopk.indexer_topk(**args, k=4)[0].shape == (0, 4)

    args = paged_args(contexts=())
    assert litetopk.indexer_logits_paged(**args).shape == (0, 256)
    assert litetopk.indexer_topk_paged(**args, k=4)[0].shape == (0, 4)

    q, keys, values, lengths = dense_args(batch=0)
    out, lse = litetopk.dense_decode(q, keys, values, lengths)
    assert out.shape == (0, 8, 128) and lse.shape == (0, 8)
    cache = litetopk.SparseKvCache.empty(0, 2, max_blocks=2)
    litetopk.sparse_kv_from_dense(cache, keys, values, lengths)
    assert litetopk.sparse_decode(cache, q)[0].shape == (0, 8, 128)
    assert litetopk.sparse_kv_rebuild(cache)[0].shape == (0, 2, 256, 128)


# ---------------------------------------------------------------- output sizes

def test_outputs_larger_than_memory_name_the_argument(monkeypatch):
    scores = RNG.standard_normal((4, 100)).astype(np.float32)
    monkeypatch.setattr(cpu, "available_memory", lambda: 1 << 30)
    with pytest.raises(MemoryError) as error:
        litetopk.select_topk(scores, 10**8)
    message = str(error.value)
    assert "k=100000000" in message and "3200000000 bytes" in message, message
    assert "[4, 100000000]" in message and "1073741824 bytes" in message, message
    assert "a row has 100 entries" in message, message
    with pytest.raises(MemoryError, match="k=100000000 makes the outputs"):
        litetopk.indexer_topk(**indexer_args(), k=10**8)
    with pytest.raises(MemoryError, match="max_context=1000000000 makes the logits"):
        litetopk.indexer_logits_paged(**dict(paged_args(), max_context=10**9))
    with pytest.raises(MemoryError, match="batch=1000, kv_heads=8, max_blocks=1000"):
        litetopk.SparseKvCache.empty(1000, 8, max_blocks=1000)
    cache = litetopk.SparseKvCache.empty(1, 2, max_blocks=2)
    with pytest.raises(MemoryError, match="capacity=10000000 makes the rebuilt keys"):
        litetopk.sparse_kv_rebuild(cache, capacity=10**7)


def test_outputs_beyond_any_memory_name_the_argument():
    with pytest.raises(MemoryError, match=r"k=1000000000000 makes the outputs indices and values "
                                          r"\[4, 1000000000000\] take 32000000000000 bytes"):
        litetopk.select_topk(np.zeros((4, 100), np.float32), 10**12)


def test_mostly_padding_warns(monkeypatch):
    monkeypatch.setattr(cpu, "PADDING_WARNING_BYTES", 1000)
    scores = RNG.standard_normal((4, 100)).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="k=1000 is larger than the 100 entries of a row"):
        indices, _ = litetopk.select_topk(scores, 1000)
    assert (indices[:, 100:] == -1).all()


# ---------------------------------------------------------------- the package

def run_python(code, **env):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, **env))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_ops_without_torch_says_so():
    # sys.modules["torch"] = None makes `import torch` fail, as without torch installed.
    out = run_python(
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "import litetopk\n"
        "assert not litetopk.ops\n"
        "assert not hasattr(litetopk.ops, '__wrapped__')\n"
        "try:\n"
        "    litetopk.ops.topk\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error)\n",
        PYTHONPATH=PYTHON)
    assert out.startswith("ModuleNotFoundError litetopk.ops.topk needs torch"), out
    assert "pip install torch" in out and "litetopk.select_topk" in out


def test_extension_from_a_build_folder_comes_first(tmp_path):
    """A build writes litetopk._C into <build>/python/litetopk (no __init__.py there); with
    <build>/python on PYTHONPATH the package searches it before its own folder."""
    build = tmp_path / "build" / "python"
    (build / "litetopk").mkdir(parents=True)
    (build / "litetopk" / "_C.abi3.so").write_bytes(b"")
    out = run_python("import litetopk\nprint(litetopk.__path__[0])",
                     PYTHONPATH=os.pathsep.join([PYTHON, str(build)]))
    assert out.strip() == str(build / "litetopk")
    out = run_python("import litetopk\nprint(len(litetopk.__path__))", PYTHONPATH=PYTHON)
    assert out.strip() == "1"  # no build folder on the path: only the package's own
