"""Finds and loads litetopk._C, the compiled extension, on first use.

The package imports without the extension (or with one built for another Python): only a call
that needs the library raises ImportError, with what was found and how to build it. A CMake build
writes the extension into its own folder, <build>/python/litetopk/ (python/CMakeLists.txt), so
that the release and cpu builds do not overwrite each other; with <build>/python on sys.path
(PYTHONPATH=python:build/release/python) the package finds it there (build_folders).
"""
import glob
import importlib
import os
import sys
import sysconfig

_module = None
_HERE = os.path.dirname(os.path.abspath(__file__))


def build_folders(package_path):
    """The folders <entry>/litetopk of sys.path entries that hold a compiled extension but no
    package (a build folder's python/litetopk), not already in package_path, in sys.path order."""
    found = []
    for entry in sys.path:
        folder = os.path.abspath(os.path.join(entry or os.curdir, "litetopk"))
        if (folder not in found and folder not in package_path
                and not os.path.exists(os.path.join(folder, "__init__.py"))
                and glob.glob(os.path.join(folder, "_C*"))):
            found.append(folder)
    return found


def _search_folders():
    package = sys.modules.get("litetopk")
    folders = list(getattr(package, "__path__", None) or [_HERE])
    root = os.path.dirname(os.path.dirname(_HERE))  # the repository, in a source tree
    folders += sorted(glob.glob(os.path.join(root, "build", "*", "python", "litetopk")))
    return list(dict.fromkeys(folders))


def _missing_message(error):
    wanted = "_C" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    lines = [
        f"litetopk's compiled extension could not be loaded ({error}).",
        f"This is Python {sys.version_info.major}.{sys.version_info.minor}; it needs {wanted} in "
        f"the package's folders ({', '.join(getattr(sys.modules.get('litetopk'), '__path__', [_HERE]))}).",
    ]
    for folder in _search_folders():
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "_C*")))
        if found:
            lines.append(f"{folder} holds {', '.join(found)}"
                         + ("" if wanted in found else " (built for another Python?)")
                         + ("" if folder in getattr(sys.modules.get("litetopk"), "__path__", [])
                            else f": put {os.path.dirname(folder)} on PYTHONPATH to use it."))
    lines.append(
        "Build it with `pip install .` from the repository root (add --no-build-isolation and "
        "-C cmake.define.LITETOPK_PREBUILT_DIR=build/release to link an existing build), or "
        "build the CMake project with nanobind installed (scripts/build.sh) and run with "
        "PYTHONPATH=python:build/release/python.")
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

