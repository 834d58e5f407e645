"""pytest setup: litetopk from the installed package, else from the source tree (python/, where
the CMake build writes the extension)."""
import importlib.util
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("litetopk") is None:
    sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "examples"))


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


torch = _torch()
has_cuda = torch is not None and torch.cuda.is_available()
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_cuda = pytest.mark.skipif(not has_cuda, reason="no CUDA GPU (or no torch)")
