"""Loads litetopk._C, the compiled extension, on first use.

The package imports without it (or with one built for another Python): only a call that needs the
library raises ImportError, with what was found and how to build it.
"""
import glob
import importlib
import os
import sys
import sysconfig

_module = None


def _missing_message(error):
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(here, "_C*")))
    wanted = "_C" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    lines = [
        f"litetopk's compiled extension could not be loaded ({error}).",
        f"This is Python {sys.version_info.major}.{sys.version_info.minor}; it needs {wanted} in "
        f"{here}" + (f", which holds {', '.join(found)} (built for another Python?)." if found
                     else ", which holds none."),
        "Build it with `pip install .` from the repository root (add --no-build-isolation and "
        "-C cmake.define.LITETOPK_PREBUILT_DIR=build/release to link an existing build), or "
        "build the CMake project with nanobind installed (scripts/build.sh) and put python/ on "
        "PYTHONPATH.",
    ]
    return "\n".join(lines)


def ext():
    """The litetopk._C module; ImportError with a clear message when it cannot be loaded."""
    global _module
    if _module is None:
        try:
            _module = importlib.import_module("litetopk._C")
        except ImportError as error:
            raise ImportError(_missing_message(error)) from error
    return _module


def available():
    """True when the compiled extension loads."""
    try:
        ext()
    except ImportError:
        return False
    return True
