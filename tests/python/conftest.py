"""pytest setup: litetopk from the installed package, else from the source tree (python/) with
the extension of a CMake build folder."""
import importlib.util
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("litetopk") is None:
    # The package from the source tree, with the extension a CMake build wrote into its build
    # folder (LITETOPK_BUILD, build/release by default).
    sys.path.insert(0, os.path.join(REPO, "python"))
    sys.path.insert(1, os.path.join(os.environ.get("LITETOPK_BUILD",
                                                   os.path.join(REPO, "build", "release")),
                                    "python"))
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
