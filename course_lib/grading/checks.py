"""Trusted check helpers for the exercise notebooks.

Every check prints exactly one verdict line and returns None (so a check cell shows nothing
else)::

    [PASS] attention: output matches F.scaled_dot_product_attention
    [FAIL] attention: output matches F.scaled_dot_product_attention: values differ beyond the tolerance. Hint: divide the scores by sqrt(d_k) before the softmax.

The student's code is always passed as a zero-argument callable (``lambda: attention(q, k, v)``)
so that the helper can run it with its prints, warnings and exceptions captured: nothing the
student's function prints can appear in (or fake) the check cell's output. The reference is
computed by the check cell itself, on fresh inputs from :func:`randn` (a private seeded
generator), usually with PyTorch's own function. Verdict lines never contain raw floats,
tensors or memory addresses, so they are identical across runs and thread counts.

The line format lives in ``verdict`` (the grader parses it with the same module). While the
student's callable runs, the functions the exercise forbids (``guard.forbid_calls``, set by the
grader from the exercise's ``forbid`` metadata) are refused: calling one fails the check. The
grader (``course_lib.grading.grade``) reads these lines; the exercise format is documented in
``exercises/README.md``.
"""
from __future__ import annotations

import contextlib
import io
import numbers
import re
import warnings
from typing import Any, Callable

import torch

from . import guard
from .verdict import format_verdict

__all__ = ["check_close", "check_equal", "check_true", "check_raises", "randn", "randint"]
CHECK_FUNCS = ("check_close", "check_equal", "check_true", "check_raises")  # the calls a check cell makes

_MAX_CAPTURE = 20_000  # characters of student output kept while a check runs (the rest is dropped)


class _CappedWriter(io.TextIOBase):
    """A text sink that keeps at most ``_MAX_CAPTURE`` characters, so an output flood inside a
    student function cannot exhaust memory."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if self.size < _MAX_CAPTURE:
            self.parts.append(s[: _MAX_CAPTURE - self.size])
            self.size += len(self.parts[-1])
        return len(s)


class _Outcome:
    __slots__ = ("value", "error")

    def __init__(self, value: Any = None, error: str | None = None) -> None:
        self.value, self.error = value, error


def _forbidden_reason(hits: list[str]) -> str:
    return (f"your code called {hits[0]}, which this exercise asks you to write yourself "
            "(it may not be called by any route)")


def _run_student(student: Callable[[], Any]) -> _Outcome:
    """Call the student's code with stdout/stderr/warnings captured, the exercise's forbidden
    functions refused, and exceptions turned into a readable reason. KeyboardInterrupt (the
    grader's time limit) is not caught."""
    if not callable(student):
        raise ValueError(
            "check helpers take the student's code as a zero-argument callable, e.g. "
            "check_close(name, lambda: attention(q, k, v), reference, hint=...)."
        )
    hits: list[str] = []
    out = _call_captured(student, hits)
    return _Outcome(error=_forbidden_reason(hits)) if hits else out


def _call_captured(student: Callable[[], Any], hits: list[str]) -> _Outcome:
    sink = _CappedWriter()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                warnings.catch_warnings(), guard.watching() as seen:
            warnings.simplefilter("ignore")
            try:
                return _Outcome(value=student())
            finally:
                hits.extend(seen)
    except NotImplementedError:
        return _Outcome(error="not implemented yet (the TODO stub still raises NotImplementedError)")
    except SystemExit:
        return _Outcome(error="your code called sys.exit() (or exit()); return a value instead")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any student error becomes a FAIL line, never a crash
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        msg = re.sub(r"0x[0-9a-fA-F]{4,}", "0x...", msg)  # no memory addresses in a verdict
        if len(msg) > 160:
            msg = msg[:157] + "..."
        return _Outcome(error=f"raised {type(exc).__name__}" + (f": {msg}" if msg else ""))


def _verdict(name: str, ok: bool, reason: str, hint: str) -> None:
    if not isinstance(name, str) or not name or "\n" in name:
        raise ValueError("a check needs a one-line, non-empty name (it is the verdict text).")
    if not isinstance(hint, str) or not hint.strip():
        raise ValueError(f"check {name!r} needs a hint: what a student should try when it fails.")
    print(format_verdict(name, ok, reason, hint))


def _shape(x: Any) -> str:
    return str(tuple(x.shape)) if hasattr(x, "shape") else type(x).__name__


def _as_list(x: Any) -> list | None:
    """A tuple/list of tensors stays a list; a single tensor becomes [tensor]."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in x):
        return list(x)
    return None


def _compare(got: Any, want: Any, atol: float, rtol: float) -> str | None:
    """None if ``got`` matches ``want`` (tensor or tuple of tensors), else the reason."""
    wants = _as_list(want)
    if wants is None:
        raise ValueError("check_close: the reference must be a tensor or a tuple of tensors.")
    gots = _as_list(got)
    if gots is None:
        if len(wants) == 1:
            return f"returned {type(got).__name__}, expected a tensor of shape {_shape(wants[0])}"
        return f"returned {type(got).__name__}, expected a tuple of {len(wants)} tensors"
    if len(gots) != len(wants):
        return f"returned {len(gots)} tensor(s), expected {len(wants)}"
    for i, (g, w) in enumerate(zip(gots, wants)):
        which = "" if len(wants) == 1 else f"result {i}: "
        if tuple(g.shape) != tuple(w.shape):
            return f"{which}shape {_shape(g)}, expected {_shape(w)}"
        if g.is_complex() or w.is_complex():
            return f"{which}complex result, expected real values"
        g64, w64 = g.detach().to(torch.float64), w.detach().to(torch.float64)
        if not torch.isfinite(g64).all() and torch.isfinite(w64).all():
            return f"{which}contains NaN or inf"
        if not torch.allclose(g64, w64, atol=atol, rtol=rtol, equal_nan=True):
            return f"{which}values differ from the reference beyond the tolerance"
    return None


def check_close(name: str, student: Callable[[], Any], reference: Any, *, hint: str,
                atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """PASS if ``student()`` returns a tensor (or tuple of tensors) with the reference's shapes
    and values within ``atol + rtol * |reference|`` (compared in float64)."""
    out = _run_student(student)
    reason = out.error if out.error else _compare(out.value, reference, atol, rtol)
    _verdict(name, reason is None, reason or "", hint)


def check_equal(name: str, student: Callable[[], Any], expected: Any, *, hint: str) -> None:
    """PASS if ``student()`` equals ``expected`` exactly (ints, bools, tuples, shapes; tensors
    must match in shape, dtype and every value)."""
    out = _run_student(student)
    reason = out.error
    if reason is None:
        got = out.value
        if isinstance(expected, torch.Tensor):
            if not isinstance(got, torch.Tensor):
                reason = f"returned {type(got).__name__}, expected a tensor of shape {_shape(expected)}"
            elif tuple(got.shape) != tuple(expected.shape):
                reason = f"shape {_shape(got)}, expected {_shape(expected)}"
            elif got.dtype != expected.dtype:
                reason = f"dtype {got.dtype}, expected {expected.dtype}"
            elif not torch.equal(got, expected):
                reason = "some entries differ from the expected values"
        else:
            reason = _exact(got, expected)
    _verdict(name, reason is None, reason or "", hint)


def _exact(got: Any, expected: Any) -> str | None:
    """None if the plain Python value ``got`` equals ``expected`` (type-aware: True is not 1)."""
    if isinstance(expected, bool) or isinstance(got, bool):
        ok = type(got) is type(expected) and got == expected
    elif isinstance(expected, numbers.Integral):
        ok = isinstance(got, numbers.Integral) and int(got) == int(expected)
    elif isinstance(expected, (tuple, list)):
        ok = isinstance(got, (tuple, list, torch.Size)) and len(got) == len(expected) and all(
            _exact(g, e) is None for g, e in zip(got, expected))
    else:
        try:
            ok = bool(got == expected)
        except Exception:
            ok = False
    return None if ok else f"returned a wrong value (a {type(got).__name__})"


def check_true(name: str, student: Callable[[], Any], predicate: Callable[[Any], Any], *,
               hint: str, why: str = "the required property does not hold") -> None:
    """PASS if ``predicate(student())`` is truthy. The predicate may also return a string: the
    reason for failing (an empty string means pass). A predicate that raises counts as a fail
    (the student's result had the wrong type or shape)."""
    out = _run_student(student)
    reason = out.error
    if reason is None:
        try:
            res = predicate(out.value)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            res = f"the result could not be checked ({type(exc).__name__}); check its type and shape"
        if isinstance(res, str):
            reason = res or None
        elif isinstance(res, torch.Tensor):
            reason = None if res.numel() == 1 and bool(res) else why
        else:
            reason = None if res else why
    _verdict(name, reason is None, reason or "", hint)


def check_raises(name: str, student: Callable[[], Any], exception: type[BaseException] = ValueError,
                 *, hint: str) -> None:
    """PASS if ``student()`` raises ``exception`` (bad input must be rejected clearly)."""
    sink = _CappedWriter()
    reason: str | None
    hits: list[str] = []
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                warnings.catch_warnings(), guard.watching() as seen:
            warnings.simplefilter("ignore")
            try:
                student()
            finally:
                hits.extend(seen)
        reason = f"no exception was raised, expected {exception.__name__}"
    except NotImplementedError:
        reason = "not implemented yet (the TODO stub still raises NotImplementedError)"
    except KeyboardInterrupt:
        raise
    except SystemExit:
        reason = "your code called sys.exit() (or exit()); raise the exception instead"
    except exception:
        reason = None
    except BaseException as exc:
        reason = f"raised {type(exc).__name__}, expected {exception.__name__}"
    if hits:
        reason = _forbidden_reason(hits)
    _verdict(name, reason is None, reason or "", hint)


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Fresh standard-normal inputs from a private generator: the same numbers on every run,
    independent of the global seed and of anything the student's code did to it."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def randint(low: int, high: int, shape: tuple[int, ...], *, seed: int) -> torch.Tensor:
    """Fresh integer inputs in [low, high) from a private seeded generator (int64)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g)
