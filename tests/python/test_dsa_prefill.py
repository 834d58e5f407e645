"""torch.ops.litetopk.dsa_prefill on CPU tensors (the CPU references) and, when there is a GPU,
CUDA tensors: against the numpy references run by hand (litetopk.cpu.indexer_topk, ks[t] added,
litetopk.cpu.sparse_attention), the _out variant, fake tensor shapes, torch.library.opcheck,
torch.compile(fullgraph=True) on both devices, a CUDA graph, bad input. Skipped without torch."""
import math

import numpy as np
import pytest

from conftest import has_cuda, needs_torch, torch

pytestmark = needs_torch
DEVICES = ["cpu"] + (["cuda"] if has_cuda else [])

if torch is not None:
    import litetopk
    from litetopk.ops import dsa_prefill

T, S, H, K, H_Q, D_QK = 16, 256, 64, 32, 16, 576


def layer_inputs(device, seed=0):
    """(index_q, (kv_fp8, kv_scale), index_weights, ks, ke, q, kv, sm_scale): ranges that start
    past 0, are shorter than k (query 1), empty (query 2) and end at S."""
    g = torch.Generator().manual_seed(seed)
    index_q = torch.randn(T, H, 128, generator=g).to(torch.float8_e4m3fn)
    kv_fp8 = torch.randn(S, 128, generator=g).to(torch.float8_e4m3fn)
    kv_scale = torch.rand(S, generator=g) + 0.5
    weights = torch.randn(T, H, generator=g) / math.sqrt(H)
    ks = torch.randint(1, S // 2, (T,), generator=g, dtype=torch.int32)
    ke = (ks + torch.randint(K, S // 2, (T,), generator=g, dtype=torch.int32)).clamp(max=S)
    ks[1], ke[1] = S - 5, S
    ks[2], ke[2] = 40, 40
    q = (torch.randn(T, H_Q, D_QK, generator=g) / 4).to(torch.bfloat16)
    kv = (torch.randn(S, 1, D_QK, generator=g) / 4).to(torch.bfloat16)
    tensors = [x.to(device) for x in (index_q, kv_fp8, kv_scale, weights, ks, ke, q, kv)]
    index_q, kv_fp8, kv_scale, weights, ks, ke, q, kv = tensors
    return index_q, (kv_fp8, kv_scale), weights, ks, ke, q, kv, 1 / math.sqrt(D_QK)


def by_hand(index_q, index_kv, weights, ks, ke, q, kv, sm_scale):
    """The numpy references: the indexer's top-k, ks[t] added where not padding, the attention."""
    kv_fp8, kv_scale = index_kv
    as_bytes = [x.cpu().view(torch.uint8).numpy() for x in (index_q, kv_fp8)]
    ks_np, ke_np = ks.cpu().numpy(), ke.cpu().numpy()
    relative, _ = litetopk.indexer_topk(as_bytes[0], as_bytes[1], kv_scale.cpu().numpy(),
                                        weights.cpu().numpy(), ks_np, ke_np, K)
    rows = np.where(relative >= 0, relative + ks_np[:, None], -1).astype(np.int32)
    bits = [x.cpu().view(torch.uint16).numpy() for x in (q, kv)]
    out, max_logits, lse = litetopk.sparse_attention(bits[0], bits[1], rows, sm_scale)
    return out, max_logits, lse, rows


def expect_layer(got, want, exact):
    out, max_logits, lse, rows = (x.cpu() for x in got)
    want_out, want_max, want_lse, want_rows = want
    if exact:
        np.testing.assert_array_equal(rows.numpy(), want_rows)
        np.testing.assert_array_equal(out.float().numpy(), want_out)
        np.testing.assert_array_equal(max_logits.numpy(), want_max)
        np.testing.assert_array_equal(lse.numpy(), want_lse)
    else:  # the GPU: the same sets up to ties, in any order; bf16 tolerance
        same = np.sort(rows.numpy(), axis=1) == np.sort(want_rows, axis=1)
        assert same.mean() > 0.99
        np.testing.assert_allclose(out.float().numpy(), want_out, atol=2e-2, rtol=2e-2)
        np.testing.assert_allclose(lse.numpy(), want_lse, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_dsa_prefill_matches_the_references_by_hand(device):
    inputs = layer_inputs(device)
    got = dsa_prefill(*inputs[:5], K, *inputs[5:])
    assert got[0].shape == (T, H_Q, 512) and got[0].dtype == torch.bfloat16
    assert got[3].shape == (T, K) and got[3].dtype == torch.int32
    expect_layer(got, by_hand(*inputs), exact=device == "cpu")
    out, max_logits, lse, rows = (x.cpu() for x in got)
    assert (rows[2] == -1).all() and (out[2].float() == 0).all()
    assert (lse[2] == -math.inf).all() and (max_logits[2] == -math.inf).all()
    assert ((rows[1] >= S - 5) | (rows[1] == -1)).all() and (rows[1] >= 0).sum() == 5
    ks = inputs[3].cpu()
    assert ((rows >= ks[:, None].to(torch.int32)) | (rows == -1)).all()


@pytest.mark.parametrize("device", DEVICES)
def test_dsa_prefill_out(device):
    inputs = layer_inputs(device, seed=1)
    want = dsa_prefill(*inputs[:5], K, *inputs[5:])
    out = torch.empty(T, H_Q, 512, dtype=torch.bfloat16, device=device)
    lse = torch.empty(T, H_Q, device=device)
    rows = torch.empty(T, K, dtype=torch.int32, device=device)
    result = dsa_prefill(*inputs[:5], K, *inputs[5:], out=(out, None, lse, rows))
    assert result[0] is out and result[3] is rows
    # Without indices the call keeps its own: the same outputs.
    out2 = torch.empty_like(out)
    dsa_prefill(*inputs[:5], K, *inputs[5:], out=(out2, None, None, None))
    if device == "cpu":
        assert torch.equal(out, want[0]) and torch.equal(lse, want[2])
        assert torch.equal(rows, want[3]) and torch.equal(out2, want[0])
    else:  # a row's order is unspecified on the GPU, and sums follow it
        assert torch.equal(rows.sort(dim=1).values, want[3].sort(dim=1).values)
        for got in (out, out2):
            torch.testing.assert_close(got.float(), want[0].float(), atol=2e-2, rtol=2e-2)


def op_args(inputs):
    index_q, (kv_fp8, kv_scale), weights, ks, ke, q, kv, sm_scale = inputs
    return (index_q, kv_fp8, kv_scale, weights, ks, ke, K, q, kv, sm_scale)


def test_dsa_prefill_fake_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    inputs = layer_inputs("cpu")
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x
                for x in op_args(inputs)]
        out, max_logits, lse, rows = torch.ops.litetopk.dsa_prefill(*fake)
    assert out.shape == (T, H_Q, 512) and out.dtype == torch.bfloat16
    assert max_logits.shape == (T, H_Q) and lse.shape == (T, H_Q)
    assert rows.shape == (T, K) and rows.dtype == torch.int32


def test_dsa_prefill_opcheck_cpu():
    # Not opcheck's schema test: it compares fp8 tensors with allclose, which torch lacks on the
    # CPU (test_torch.py's FP8_OPCHECK).
    tests = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    args = op_args(layer_inputs("cpu"))
    torch.library.opcheck(torch.ops.litetopk.dsa_prefill.default, args, test_utils=tests)
    out = torch.empty(T, H_Q, 512, dtype=torch.bfloat16)
    rows = torch.empty(T, K, dtype=torch.int32)
    torch.library.opcheck(torch.ops.litetopk.dsa_prefill_out.default, (*args, out, None, None,
                                                                       rows), test_utils=tests)


def eager_and_compiled(device, seed, **compile_options):
    """The layer (out * 2, lse, rows) run eagerly and under torch.compile(fullgraph=True)."""
    inputs = layer_inputs(device, seed=seed)

    def layer(index_q, kv_fp8, kv_scale, weights, ks, ke, q, kv):
        out, _, lse, rows = dsa_prefill(index_q, (kv_fp8, kv_scale), weights, ks, ke, K, q, kv,
                                        inputs[7])
        return out.float() * 2, lse, rows

    flat = (inputs[0], *inputs[1], *inputs[2:7])
    eager = layer(*flat)
    torch._dynamo.reset()
    return eager, torch.compile(layer, fullgraph=True, **compile_options)(*flat)


def test_dsa_prefill_compiles_fullgraph_cpu():
    """torch.compile(fullgraph=True) with aot_eager (no C++ compiler needed): the op traces with
    its fake and runs the same as eager."""
    eager, compiled = eager_and_compiled("cpu", 2, backend="aot_eager")
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)


@pytest.mark.skipif(not has_cuda, reason="no CUDA GPU")
def test_dsa_prefill_compiles_fullgraph_cuda():
    """torch.compile(fullgraph=True) with the default backend on CUDA tensors: the same index sets
    as eager (a row's order is unspecified) and the same attention up to the order of sums."""
    eager, compiled = eager_and_compiled("cuda", 5)
    assert torch.equal(compiled[2].sort(dim=1).values, eager[2].sort(dim=1).values)
    torch.testing.assert_close(compiled[0], eager[0], atol=4e-2, rtol=2e-2)
    torch.testing.assert_close(compiled[1], eager[1], atol=1e-3, rtol=1e-3, equal_nan=True)


def test_dsa_prefill_bad_input():
    inputs = list(layer_inputs("cpu"))
    with pytest.raises(ValueError, match="index_heads must be 32 or 64, got 16"):
        small = inputs[0][:, :16].contiguous()
        dsa_prefill(small, inputs[1], inputs[2][:, :16].contiguous(), *inputs[3:5], K,
                    *inputs[5:])
    with pytest.raises(ValueError, match="dsa_prefill attention: q must be"):
        dsa_prefill(*inputs[:5], K, inputs[5].float(), *inputs[6:])
    with pytest.raises(ValueError, match=r"q and kv must be \[T = 16, .* indexer's inputs"):
        dsa_prefill(*inputs[:5], K, inputs[5][:8].contiguous(), *inputs[6:])
    with pytest.raises(ValueError, match="k must be in"):
        dsa_prefill(*inputs[:5], 9000, *inputs[5:])
    with pytest.raises(ValueError, match="attention_algo must be one of"):
        dsa_prefill(*inputs[:5], K, *inputs[5:], attention_algo="fastest")
    with pytest.raises(ValueError, match="indexer_algo must be one of"):
        dsa_prefill(*inputs[:5], K, *inputs[5:], indexer_algo="fastest")


@pytest.mark.skipif(not has_cuda, reason="no CUDA GPU")
def test_dsa_prefill_cuda_graph():
    inputs = layer_inputs("cuda", seed=3)
    want = dsa_prefill(*inputs[:5], K, *inputs[5:])
    out = torch.empty_like(want[0])
    rows = torch.empty_like(want[3])
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        dsa_prefill(*inputs[:5], K, *inputs[5:], out=(out, None, None, rows))  # warm-up plan
        with torch.cuda.graph(graph, stream=stream):
            dsa_prefill(*inputs[:5], K, *inputs[5:], out=(out, None, None, rows))
    fresh = layer_inputs("cuda", seed=4)
    for target, source in zip((inputs[0], *inputs[1], *inputs[2:7]),
                              (fresh[0], *fresh[1], *fresh[2:7])):
        target.copy_(source)
    graph.replay()
    torch.cuda.synchronize()
    again = dsa_prefill(*inputs[:5], K, *inputs[5:])
    # The same sets (a row's order is unspecified), and the same outputs up to the order of sums.
    assert torch.equal(rows.sort(dim=1).values, again[3].sort(dim=1).values)
    torch.testing.assert_close(out.float(), again[0].float(), atol=2e-2, rtol=2e-2)
