"""Plain data across the line between the student's process and the checker (stdlib and torch).

What a student's function returns reaches the checker only as *plain data*: ``None``, bools,
ints, floats, strings, lists, tuples, dicts of them, ``torch.Size``, ``torch.dtype``, and
tensors sent as dtype (from an allow-list) + shape + raw bytes. Never pickle: the checker
rebuilds a fresh, plain ``torch.Tensor`` from the bytes (``torch.frombuffer``), so no tensor
subclass, overridden ``__eq__`` or lying object of the student's survives the trip.

``encode`` runs in the student's process (where everything may be forged, so it only has to
turn honest values into JSON-able data); ``decode`` runs in the checker and trusts nothing: it
checks every tag, type, size, depth and byte count, and raises :class:`WireError` on anything
else. ``write_frame``/``read_frame`` move one JSON document over a pipe, length-prefixed and
size-capped.
"""

from __future__ import annotations

import base64
import json
import math
import os
import select
import struct
import time
from typing import Any

import torch

__all__ = [
    "FrameBuffer",
    "write_frame_by",
    "one_line",
    "WireError",
    "Unsendable",
    "encode",
    "decode",
    "dumps",
    "loads",
    "write_frame",
    "read_frame",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_ITEMS",
]

MAX_BYTES = 64 * 1024 * 1024  # the largest message (a student's results of one exercise)
MAX_DEPTH = 32  # nesting of lists, tuples and dicts
MAX_ITEMS = 200_000  # values in one message
MAX_STR = 1_000_000  # characters of one string
MAX_INT_DIGITS = 400

_DTYPES = {  # the tensor dtypes that cross (name -> dtype); anything else is refused
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_HEADER = struct.Struct("!Q")


class WireError(ValueError):
    """A message that is not plain data in the expected form (decoding in the checker)."""


class Unsendable(TypeError):
    """A value the student's process cannot send (encoding): an object, a function, a module..."""


# --------------------------------------------------------------------------- encoding (student
# side)
MAX_VALUE_BYTES = 16 * 1024 * 1024  # tensor bytes in one check's value


def encode(value: Any, _depth: int = 0, _budget: list[int] | None = None) -> Any:
    """JSON-able plain data for ``value``; :class:`Unsendable` for anything else, or for more
    than ``MAX_VALUE_BYTES`` of tensor data."""
    budget = [MAX_VALUE_BYTES] if _budget is None else _budget
    if _depth > MAX_DEPTH:
        raise Unsendable(f"nested more than {MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, str)):
        return value if not isinstance(value, str) else {"t": "str", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": str(int(value))}
    if isinstance(value, float):
        return {"t": "float", "v": repr(float(value))}
    if isinstance(value, torch.Size):
        return {"t": "size", "v": [int(d) for d in value]}
    if isinstance(value, torch.dtype):
        if value not in _NAMES:
            raise Unsendable(f"dtype {value}")
        return {"t": "dtype", "v": _NAMES[value]}
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        if t.dtype not in _NAMES:
            raise Unsendable(f"a tensor of dtype {t.dtype}")
        budget[0] -= t.numel() * t.element_size()
        if budget[0] < 0:
            raise Unsendable(f"more than {MAX_VALUE_BYTES // 2**20} MB of tensor data")
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {
            "t": "tensor",
            "dtype": _NAMES[t.dtype],
            "shape": [int(d) for d in t.shape],
            "data": base64.b64encode(raw).decode("ascii"),
        }
    if type(value).__module__ == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray):
            return encode(torch.from_numpy(np.ascontiguousarray(value)), _depth, budget)
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return encode(int(value), _depth, budget)
        if isinstance(value, np.floating):
            return encode(float(value), _depth, budget)
    if isinstance(value, (list, tuple)):
        return {
            "t": "tuple" if isinstance(value, tuple) else "list",
            "v": [encode(v, _depth + 1, budget) for v in value],
        }
    if isinstance(value, dict):
        keys = list(value)
        if not all(_plain_key(k) for k in keys):
            raise Unsendable("a dict whose keys are not strings, numbers or tuples of them")
        return {
            "t": "dict",
            "k": [encode(k, _depth + 1, budget) for k in keys],
            "v": [encode(value[k], _depth + 1, budget) for k in keys],
        }
    raise Unsendable(f"a {type(value).__name__}")


def one_line(text: Any, limit: int = 300) -> str:
    """Untrusted text (a reason or an error from the student's process) as one printable line
    of at most ``limit`` characters, fit for a report."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))[:limit]


def _plain_key(k: Any, depth: int = 0) -> bool:
    """A dict key that crosses: a string, a number, or a (short) tuple of them."""
    if isinstance(k, bool) or k is None:
        return True
    if isinstance(k, (str, int, float)):
        return True
    return (
        isinstance(k, tuple)
        and depth < 4
        and len(k) <= 64
        and all(_plain_key(x, depth + 1) for x in k)
    )


def dumps(value: Any) -> bytes:
    """``encode`` then JSON bytes."""
    return json.dumps(encode(value), separators=(",", ":")).encode()


# --------------------------------------------------------------------------- decoding (checker
# side)
class _Budget:
    def __init__(self) -> None:
        self.items = 0

    def tick(self) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise WireError(f"more than {MAX_ITEMS} values")


def decode(data: Any, _depth: int = 0, _budget: _Budget | None = None) -> Any:
    """The value ``data`` (from ``encode``) stands for, built from scratch; WireError otherwise."""
    budget = _budget or _Budget()
    budget.tick()
    if _depth > MAX_DEPTH + 1:
        raise WireError("nested too deep")
    if data is None or isinstance(data, bool):
        return data
    if not isinstance(data, dict) or not isinstance(data.get("t"), str):
        raise WireError(f"unexpected element {type(data).__name__}")
    tag = data["t"]
    if tag == "str":
        return _str(data.get("v"))
    if tag == "int":
        s = _str(data.get("v"))
        if len(s) > MAX_INT_DIGITS or not s.lstrip("-").isdigit() or not s.isascii():
            raise WireError("a malformed integer")
        return int(s)
    if tag == "float":
        s = _str(data.get("v"))
        if len(s) > 40:
            raise WireError("a malformed float")
        try:
            return float(s)
        except ValueError:
            raise WireError("a malformed float") from None
    if tag == "size":
        return torch.Size(_dims(data.get("v")))
    if tag == "dtype":
        if data.get("v") not in _DTYPES:
            raise WireError("an unknown dtype")
        return _DTYPES[data["v"]]
    if tag == "tensor":
        return _tensor(data)
    if tag in ("list", "tuple"):
        items = data.get("v")
        if not isinstance(items, list):
            raise WireError(f"a malformed {tag}")
        out = [decode(v, _depth + 1, budget) for v in items]
        return tuple(out) if tag == "tuple" else out
    if tag == "dict":
        keys, vals = data.get("k"), data.get("v")
        if not isinstance(keys, list) or not isinstance(vals, list) or len(keys) != len(vals):
            raise WireError("a malformed dict")
        ks = [decode(k, _depth + 1, budget) for k in keys]
        if not all(_plain_key(k) for k in ks):
            raise WireError("a dict key that is not a string, a number or a tuple of them")
        return dict(zip(ks, (decode(v, _depth + 1, budget) for v in vals)))
    raise WireError(f"an unknown tag {tag[:20]!r}")


def _str(v: Any) -> str:
    if not isinstance(v, str) or len(v) > MAX_STR:
        raise WireError("a malformed string")
    return v


def _dims(v: Any) -> list[int]:
    if (
        not isinstance(v, list)
        or len(v) > 16
        or not all(type(d) is int and 0 <= d < 2**40 for d in v)
    ):
        raise WireError("a malformed shape")
    return v


def _tensor(data: dict) -> torch.Tensor:
    dtype = _DTYPES.get(data.get("dtype"))
    if dtype is None:
        raise WireError("a tensor of an unknown dtype")
    shape = _dims(data.get("shape"))
    raw_b64 = data.get("data")
    if not isinstance(raw_b64, str):
        raise WireError("a tensor without data")
    try:
        raw = base64.b64decode(raw_b64, validate=True)
    except ValueError:
        raise WireError("a tensor whose data is not base64") from None
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise WireError(f"a tensor of shape {tuple(shape)} with {len(raw)} bytes")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).clone()


def loads(raw: bytes) -> Any:
    """JSON bytes (size-capped) then ``decode``."""
    if len(raw) > MAX_BYTES:
        raise WireError(f"a message over {MAX_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise WireError("not JSON") from None
    return decode(data)


# --------------------------------------------------------------------------- frames over pipes
def write_frame(fd: int, obj: Any) -> None:
    """One JSON document on descriptor ``fd``: 8-byte length, then the bytes."""
    raw = json.dumps(obj, separators=(",", ":")).encode()
    buf = memoryview(_HEADER.pack(len(raw)) + raw)
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int, max_bytes: int = MAX_BYTES) -> Any:
    """The next JSON document on ``fd`` (as parsed JSON, not decoded); None at end of file.
    WireError for a frame over ``max_bytes`` or that is not JSON."""
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    (n,) = _HEADER.unpack(head)
    if n > max_bytes:
        raise WireError(f"a message of {n} bytes (limit {max_bytes})")
    raw = _read_exact(fd, n)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise WireError("a message that is not JSON") from None


def write_frame_by(fd: int, obj: Any, deadline: float) -> None:
    """``write_frame`` on a non-blocking descriptor that gives up at ``deadline`` (a
    ``time.monotonic()`` value): TimeoutError when the reader has not taken the whole frame by
    then, BrokenPipeError (an OSError) when it has gone."""
    raw = json.dumps(obj, separators=(",", ":")).encode()
    buf = memoryview(_HEADER.pack(len(raw)) + raw)
    os.set_blocking(fd, False)
    while buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the reader did not take the message in time")
        _, ready, _ = select.select([], [fd], [], min(left, 1.0))
        if not ready:
            continue
        try:
            n = os.write(fd, buf)
        except BlockingIOError:
            continue
        buf = buf[n:]


class FrameBuffer:
    """Reads length-prefixed JSON frames from a descriptor without ever blocking (sets it
    non-blocking: a writer may send half a frame and stall). ``limit``: the largest frame."""

    def __init__(self, fd: int, limit: int = MAX_BYTES) -> None:
        self.fd, self.limit, self.buf, self.eof = fd, limit, bytearray(), False
        os.set_blocking(fd, False)

    def pump(self) -> None:
        """Read what is there (sets ``eof`` at end of file); ValueError past the size limit."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
                return
            self.buf += chunk
            if len(self.buf) > self.limit + _HEADER.size:
                raise WireError("a message over the size limit")

    def frames(self) -> list:
        """The complete frames received so far (parsed JSON); WireError for a bad one."""
        out = []
        while len(self.buf) >= _HEADER.size:
            (n,) = _HEADER.unpack(self.buf[: _HEADER.size])
            if n > self.limit:
                raise WireError("a message over the size limit")
            if len(self.buf) < _HEADER.size + n:
                break
            raw = bytes(self.buf[_HEADER.size : _HEADER.size + n])
            del self.buf[: _HEADER.size + n]
            try:
                out.append(json.loads(raw))
            except (ValueError, RecursionError):
                raise WireError("a message that is not JSON") from None
        return out

    def wait(self, deadline: float) -> list:
        """Block until at least one frame, end of file or ``deadline``; the frames so far."""
        while True:
            got = self.frames()
            if got or self.eof:
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                self.pump()
