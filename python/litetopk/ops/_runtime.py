"""The eager runtime the torch ops share: tensor views for the argument checks, the current
stream and device, plans kept per signature, the workspace, and op registration."""
import atexit
import contextlib
import threading

import torch

from .._ext import ext


def library():
    """litetopk._C (looked up through `ext` on each call, so that tests can stand in for it)."""
    return ext()


_NAMES = {
    torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
    torch.int32: "int32", torch.uint8: "uint8", torch.int8: "int8", torch.bool: "bool",
    torch.float8_e4m3fn: "float8_e4m3fn",
}


def _view(t):
    return (t.data_ptr(), t.shape, t.stride(), _NAMES.get(t.dtype, str(t.dtype)), t.get_device(),
            t.is_contiguous())


def _opt(t):
    return None if t is None else _view(t)


# ---------------------------------------------------------------- the eager CUDA path
# A CUDA call plans once per signature (every tensor's shape, strides, dtype and device, and the
# scalar arguments: everything the checks and the plan read): the Python checks, then the
# library's plan (validation, the algorithm, the workspace size), kept per signature; later calls
# with the same signature only read the addresses and call the library's launch.

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_capturing = (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
              or torch.cuda.is_current_stream_capturing)
_thread = threading.get_ident


def _stream(device):
    """The current stream of CUDA device `device` (an index) as an int."""
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


def _on(device):
    """The library launches on the current device: switch to the tensors' device (an index) when
    needed."""
    if device == _current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def _meta(t):
    """What the argument checks read of a tensor (None stays None)."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())


def _ptr(t):
    return 0 if t is None else t.data_ptr()


_PLANS_MAX = 4096
_plans = {}
# The plans hold the extension's objects: drop them before the interpreter tears the extension
# down (nanobind reports objects still alive then as leaks).
atexit.register(lambda: _plans.clear())


def _plan_of(key):
    """The plan kept for a signature, or None."""
    return _plans.get(key)


def _remember(key, plan):
    if len(_plans) >= _PLANS_MAX:  # e.g. a new prefill chunk length per call: start over
        _plans.clear()
    _plans[key] = plan
    return plan


def _launch(device, launch, *args):
    """launch(*args) with CUDA device `device` current (the library launches on the current
    device)."""
    if device == _current_device():
        return launch(*args)
    with torch.cuda.device(device):
        return launch(*args)


def _empty_workspace(nbytes, device):
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


# Eager calls on the default stream reuse one workspace per (device, thread): calls on one stream
# run in order, so a call's kernels start after the previous call's are done with it, and a thread
# enqueues all of a call's launches before its next call starts. Other streams (where CUDA graphs
# are captured, and where torch.compile's CUDA graph trees run with their private memory pool),
# calls under capture, and workspaces over the cap take one of their own from torch's caching
# allocator per call.
_SCRATCH_MAX_BYTES = 16 << 20
_SCRATCH_MIN_BYTES = 64 << 10
_SCRATCH_ENTRIES = 16
_scratch = {}


def _workspace(nbytes, device, stream):
    """(address, owner) of nbytes of workspace for a launch on `stream` of device `device` (the
    current device); keep the owner alive until the launch is enqueued."""
    if nbytes == 0:
        return 0, None
    if stream == 0 and nbytes <= _SCRATCH_MAX_BYTES and not _capturing():
        key = (device, _thread())
        entry = _scratch.get(key)
        if entry is None or entry[1] < nbytes:
            if entry is None and len(_scratch) >= _SCRATCH_ENTRIES:
                del _scratch[next(iter(_scratch))]
            owner = _empty_workspace(max(nbytes, _SCRATCH_MIN_BYTES), device)
            entry = _scratch[key] = (owner.data_ptr(), owner.numel(), owner)
        return entry[0], entry[2]
    owner = _empty_workspace(nbytes, device)
    return owner.data_ptr(), owner


_lib = torch.library.Library("litetopk", "FRAGMENT")


def _register(schema, impl, fake):
    name = schema.split("(", 1)[0]
    _lib.define(schema)
    _lib.impl(name, impl, "CUDA")
    _lib.impl(name, impl, "CPU")
    torch.library.register_fake(f"litetopk::{name}", fake, lib=_lib)



# ---- the Python front
# The functions below call the ops' implementation directly when nothing traces them (real
# tensors, no torch.compile, no dispatch mode such as FakeTensorMode): the same code the op runs,
# without the dispatcher's round trip into Python. Anything else goes through torch.ops.litetopk.

_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_Tensor = torch.Tensor


def _direct(*tensors):
    if _is_compiling() or _dispatch_modes():
        return False
    for t in tensors:
        if t is not None and type(t) is not _Tensor:
            return False
    return True


