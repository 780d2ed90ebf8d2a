"""Output files of the Python tools: a temporary opened as a file of its own, and its
removal. Standard library only (the ONNX exporter, which has no torch, uses it too)."""
from __future__ import annotations

import os
from typing import IO, Any


def open_new(path: str, mode: str, **kwargs: Any) -> IO[Any]:
    """`path` opened for writing as a file of its own: whatever is there (a temporary a run
    that died left, or a link or file someone planted) is removed, never followed nor
    written into (O_EXCL | O_NOFOLLOW refuse anything planted again in between)."""
    remove_quietly(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666)
    try:
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def remove_quietly(path: str) -> None:
    """Removes a temporary file left by a failed write; a missing one is no error."""
    try:
        os.remove(path)
    except OSError:
        pass
