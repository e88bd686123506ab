"""The CUDA version the installed TensorFlow was built with, read from its generated
build_info module's source without importing TensorFlow: the health facts judge the driver
against it where TensorFlow may be broken (tfbench.measure.health_read's child).
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import re
from typing import Any, Optional, Sequence


def tensorflow_cuda(search_path: Optional[Sequence[str]] = None
                    ) -> tuple[Optional[tuple[int, int]], str]:
    """((major, minor) of the CUDA the installed TensorFlow was built with, '') or (None, why
    not: no TensorFlow, not a CUDA build), read from its generated build_info module's source
    without importing TensorFlow (the health facts are read where TensorFlow may be broken).
    `search_path`: where to look for the tensorflow package (sys.path when None)."""
    spec = importlib.machinery.PathFinder.find_spec("tensorflow", search_path)
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = next((p for p in (os.path.join(f, "python", "platform", "build_info.py")
                             for f in folders) if os.path.isfile(p)), None)
    if path is None:
        return None, "no TensorFlow installed" if not folders else \
            "TensorFlow's build_info module not found"
    try:
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        info: dict[str, Any] = {}
        for node in ast.walk(tree):   # build_info = collections.OrderedDict([(key, value), ...])
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List):
                info.update(dict(ast.literal_eval(node.args[0])))
    except (OSError, SyntaxError, ValueError, TypeError) as exc:
        return None, "TensorFlow's build_info module unreadable (%s)" % type(exc).__name__
    if not info.get("is_cuda_build"):
        return None, "TensorFlow is not a CUDA build"
    version = str(info.get("cuda_version") or "")
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        return None, "TensorFlow's build names no CUDA version (%r)" % version
    return (int(match.group(1)), int(match.group(2))), ""
