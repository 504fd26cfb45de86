"""Check helpers for the exercise notebooks: what a check cell calls.

Every check names itself, takes the student's code as a zero-argument callable (``lambda:
attention(q, k, v)``), a reference or a predicate, and a hint::

    [PASS] attention: output matches F.scaled_dot_product_attention
    [FAIL] attention: output matches F.scaled_dot_product_attention: values differ beyond the
    tolerance. Hint: divide the scores by sqrt(d_k) before the softmax.

A check cell runs in three places, and the module's *mode* says which:

- ``live`` (a notebook in Jupyter or Colab): call the student's code, compare, print the verdict;
- ``student`` (grading, in the sandboxed student process): the check cell runs there only as
  its *student program* (``split``): each check is a ``student_check(kind, name, student)``
  that calls the student's code with its output, warnings and exceptions captured and the
  exercise's forbidden functions refused (``guard``), and records the outcome as *plain data*
  (``wire``); the reference, predicate, measurement and hint are never evaluated there (a
  ``check_*`` call in this mode is an error); print and judge nothing;
- ``checker`` (grading, in the trusted checker process, which never runs student code): never
  call the student's callable; take the outcome the student process recorded for this check,
  rebuild it from plain data, and judge it against the reference or predicate computed here;
- ``skip``: do nothing (the student's process binds the names of earlier exercises' student
  programs this way; the checker, the check cells of an exercise that did not run).

So whatever the student's code does in its own process (patch these helpers, torch or builtins,
print fake verdicts, walk the stack or ``gc`` for the answer), it can only change the values it
hands over, never how they are judged, and it finds no reference there. References are computed
by the check cell in the checker (live: in the notebook), on inputs from :func:`randn` (a
private seeded generator), usually with PyTorch's own function. Verdict lines never contain
raw floats, tensors or memory addresses, so they are identical across runs and thread counts.
The line format lives in ``verdict``; the grading processes are ``student`` and ``checker``.
"""

from __future__ import annotations

import contextlib
import io
import numbers
import re
import warnings
from typing import Any, Callable

import torch

from . import guard, wire
from .verdict import CHANGED, MEASURED, format_verdict

__all__ = [
    "check_close",
    "check_equal",
    "check_true",
    "check_raises",
    "check_prediction",
    "randn",
    "randint",
]
CHECK_FUNCS = (
    "check_close",
    "check_equal",
    "check_true",
    "check_raises",
    "check_prediction",
)  # the calls a check cell makes
MODES = ("live", "student", "checker", "skip")

_MAX_CAPTURE = 20_000  # characters of student output kept while a check runs (the rest is dropped)
_MAX_REASON = 300  # characters of a failure reason that came from the student's process


class _State:
    """Where this process is (``mode``), which check cell runs and how many checks it has made,
    and the grading's records: the student's outcomes (``student`` mode, in call order), the
    outcomes handed to the checker by (cell, index), and the checker's verdicts."""

    def __init__(self) -> None:
        self.mode = "live"
        self.cell: str | None = None
        self.index = 0
        self.results: list[dict] = []
        self.outcomes: dict[tuple[str | None, int], dict] = {}
        self.verdicts: list[dict] = []
        # predict, then run: what the grader read in the submission about this check cell
        # (checker), and every prediction a measuring check has seen in this kernel (live)
        self.facts: dict | None = None
        self.seen: dict[tuple[str | None, str], list[float]] = {}


_state = _State()


def set_mode(mode: str) -> None:
    """Switch this process's mode (the grading processes do; a notebook stays ``live``)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    _state.mode = mode


def begin_cell(
    cell_id: str | None, outcomes: list[dict] | None = None, facts: dict | None = None
) -> None:
    """Before a check cell runs in a grading process: its id, and (checker) the student's
    outcomes for it, in the order its checks ran there, and what the grader read about the cell
    in the saved submission (``facts``: the execution counts of the prediction and of this
    measuring cell, for ``check_prediction``)."""
    _state.cell, _state.index = cell_id, 0
    _state.facts = facts if isinstance(facts, dict) else None
    if outcomes is not None:
        _state.outcomes = {(cell_id, i): o for i, o in enumerate(outcomes)}


def take_results() -> list[dict]:
    """The student process's recorded outcomes so far (and forget them)."""
    out, _state.results = _state.results, []
    return out


def take_verdicts() -> list[dict]:
    """The checker's verdicts so far (and forget them)."""
    out, _state.verdicts = _state.verdicts, []
    return out


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
    """What calling the student's code gave: a value, or an error (why it is a fail), and for
    ``check_raises`` the names of the raised exception's classes (None: nothing raised)."""

    __slots__ = ("value", "error", "raised")

    def __init__(
        self, value: Any = None, error: str | None = None, raised: list[str] | None = None
    ) -> None:
        self.value, self.error, self.raised = value, error, raised


def _forbidden_reason(hits: list[str]) -> str:
    return (
        f"your code called {hits[0]}, which this exercise asks you to write yourself "
        "(it may not be called by any route)"
    )


def _clean(msg: str) -> str:
    """One short line without memory addresses (verdicts are identical across runs)."""
    msg = msg.strip().splitlines()[0] if msg.strip() else ""
    msg = re.sub(r"0x[0-9a-fA-F]{4,}", "0x...", msg)
    return msg[:157] + "..." if len(msg) > 160 else msg


def _run_student(student: Callable[[], Any], expect_raise: bool = False) -> _Outcome:
    """Call the student's code with stdout/stderr/warnings captured, the exercise's forbidden
    functions refused, and exceptions turned into a readable reason (``expect_raise``: an
    exception is the result, recorded by its class names). KeyboardInterrupt is not caught."""
    if not callable(student):
        raise ValueError(
            "check helpers take the student's code as a zero-argument callable, e.g. "
            "check_close(name, lambda: attention(q, k, v), reference, hint=...)."
        )
    hits: list[str] = []
    out = _call_captured(student, hits, expect_raise)
    return _Outcome(error=_forbidden_reason(hits)) if hits else out


def _call_captured(student: Callable[[], Any], hits: list[str], expect_raise: bool) -> _Outcome:
    sink = _CappedWriter()
    try:
        with (
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
            warnings.catch_warnings(),
            guard.watching() as seen,
        ):
            warnings.simplefilter("ignore")
            try:
                return _Outcome(value=student())
            finally:
                hits.extend(seen)
    except NotImplementedError:
        return _Outcome(
            error="not implemented yet (the TODO stub still raises NotImplementedError)"
        )
    except SystemExit:
        return _Outcome(
            error="your code called sys.exit() (or exit()); "
            + ("raise the exception instead" if expect_raise else "return a value instead")
        )
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any student error becomes a FAIL line, never a crash
        if expect_raise:
            return _Outcome(raised=[c.__name__ for c in type(exc).__mro__])
        msg = _clean(str(exc))
        return _Outcome(error=f"raised {type(exc).__name__}" + (f": {msg}" if msg else ""))


def _verdict(name: str, ok: bool, reason: str, hint: str) -> None:
    if _state.mode == "checker":
        _state.verdicts.append(
            {"cell": _state.cell, "name": name, "passed": ok, "reason": reason, "hint": hint}
        )
    else:
        print(format_verdict(name, ok, reason, hint))


def _check_args(name: Any, hint: Any) -> None:
    if not isinstance(name, str) or not name or "\n" in name:
        raise ValueError("a check needs a one-line, non-empty name (it is the verdict text).")
    if not isinstance(hint, str) or not hint.strip():
        raise ValueError(f"check {name!r} needs a hint: what a student should try when it fails.")


def _record(name: str, out: _Outcome) -> None:
    """Student mode: the outcome as plain data (a value that cannot cross becomes an error)."""
    rec: dict[str, Any] = {
        "cell": _state.cell,
        "index": _state.index,
        "name": name,
        "error": out.error,
    }
    if out.error is None:
        if out.raised is not None:
            rec["raised"] = [str(n) for n in out.raised][:64]
        else:
            try:
                rec["value"] = wire.encode(out.value)
            except wire.Unsendable as exc:
                rec["error"] = (
                    f"returned {exc}, which the grader cannot compare: return tensors, numbers, "
                    "strings, or lists, tuples and dicts of them"
                )
            except Exception as exc:  # a value whose conversion raises (the student's own class)
                rec["error"] = f"the returned value could not be read ({type(exc).__name__})"
    _state.results.append(rec)


def _received(name: str, expect_raise: bool) -> _Outcome:
    """Checker mode: the student's outcome for this check, rebuilt from plain data."""
    rec = _state.outcomes.get((_state.cell, _state.index))
    if not isinstance(rec, dict) or rec.get("name") != name:
        return _Outcome(
            error="this check did not run in your process (an earlier error, a crash or the time "
            "limit stopped it)"
        )
    err = rec.get("error")
    if err is not None:
        text = str(err) if isinstance(err, str) else "a malformed error"
        text = wire.one_line(text, _MAX_REASON)
        return _Outcome(error=text or "failed")
    if expect_raise:
        raised = rec.get("raised")
        if raised is None:
            return _Outcome(raised=None)
        if (
            not isinstance(raised, list)
            or not all(isinstance(n, str) for n in raised)
            or not raised
        ):
            return _Outcome(error="a malformed result came back from your process")
        return _Outcome(raised=[n[:80] for n in raised[:64]])
    if "value" not in rec:
        return _Outcome(error="no value came back from your process")
    try:
        return _Outcome(value=wire.decode(rec["value"]))
    except wire.WireError as exc:
        return _Outcome(error=f"the value that came back could not be read ({exc})")


def _check(
    name: str,
    hint: str,
    student: Callable[[], Any],
    judge: Callable[[_Outcome], str | None],
    expect_raise: bool = False,
) -> None:
    """One check in the current mode: get the outcome (call, record or receive), judge it."""
    _check_args(name, hint)
    mode = _state.mode
    if mode == "student":
        raise RuntimeError(
            "a check cell runs in the student's process only as its student program "
            "(split.student_cells), which calls student_check: the reference, predicate and hint "
            "are never evaluated there"
        )
    try:
        if mode == "skip":
            return
        out = (
            _received(name, expect_raise)
            if mode == "checker"
            else _run_student(student, expect_raise)
        )
        reason = judge(out)
        _verdict(name, reason is None, reason or "", hint)
    finally:
        _state.index += 1


def student_check(kind: str, name: str, student: Callable[[], Any]) -> None:
    """A check as the student's process runs it: ``split`` rewrites each ``check_*(name,
    student, reference, ..., hint=...)`` of a check cell to ``student_check("check_*", name,
    student)``. Student mode: call the student's code (captured, guarded) and record the outcome
    as plain data for the checker; skip mode: nothing. The reference, predicate, measurement,
    tolerances and hint never reach this process."""
    if kind not in CHECK_FUNCS:
        raise ValueError(f"unknown check kind {kind!r}")
    if not isinstance(name, str) or not name or "\n" in name:
        raise ValueError("a check needs a one-line, non-empty name (it is the verdict text).")
    mode = _state.mode
    if mode not in ("student", "skip"):
        raise RuntimeError(f"student_check runs in the student's process only (mode {mode!r})")
    try:
        if mode == "student":
            _record(name, _run_student(student, expect_raise=kind == "check_raises"))
    finally:
        _state.index += 1


def _value_judge(compare: Callable[[Any], str | None]) -> Callable[[_Outcome], str | None]:
    return lambda out: out.error if out.error else compare(out.value)


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


def check_close(
    name: str,
    student: Callable[[], Any],
    reference: Any,
    *,
    hint: str,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """PASS if ``student()`` returns a tensor (or tuple of tensors) with the reference's shapes
    and values within ``atol + rtol * |reference|`` (compared in float64)."""
    _check(name, hint, student, _value_judge(lambda got: _compare(got, reference, atol, rtol)))


def _equal(got: Any, expected: Any) -> str | None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"returned {type(got).__name__}, expected a tensor of shape {_shape(expected)}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"shape {_shape(got)}, expected {_shape(expected)}"
        if got.dtype != expected.dtype:
            return f"dtype {got.dtype}, expected {expected.dtype}"
        if not torch.equal(got, expected):
            return "some entries differ from the expected values"
        return None
    return _exact(got, expected)


def check_equal(name: str, student: Callable[[], Any], expected: Any, *, hint: str) -> None:
    """PASS if ``student()`` equals ``expected`` exactly (ints, bools, tuples, shapes; tensors
    must match in shape, dtype and every value)."""
    _check(name, hint, student, _value_judge(lambda got: _equal(got, expected)))


def _exact(got: Any, expected: Any) -> str | None:
    """None if the plain Python value ``got`` equals ``expected`` (type-aware: True is not 1)."""
    if isinstance(expected, bool) or isinstance(got, bool):
        ok = type(got) is type(expected) and got == expected
    elif isinstance(expected, numbers.Integral):
        ok = isinstance(got, numbers.Integral) and int(got) == int(expected)
    elif isinstance(expected, (tuple, list)):
        ok = (
            isinstance(got, (tuple, list, torch.Size))
            and len(got) == len(expected)
            and all(_exact(g, e) is None for g, e in zip(got, expected))
        )
    else:
        try:
            ok = bool(got == expected)
        except Exception:
            ok = False
    return None if ok else f"returned a wrong value (a {type(got).__name__})"


def _predicate_reason(predicate: Callable[[Any], Any], value: Any, why: str) -> str | None:
    try:
        res = predicate(value)
    except KeyboardInterrupt:
        raise
    except NotImplementedError:
        return "not implemented yet (the TODO stub still raises NotImplementedError)"
    except Exception as exc:
        return f"the result could not be checked ({type(exc).__name__}); check its type and shape"
    if isinstance(res, str):
        return res or None
    if isinstance(res, torch.Tensor):
        return None if res.numel() == 1 and bool(res) else why
    return None if res else why


def check_true(
    name: str,
    student: Callable[[], Any],
    predicate: Callable[[Any], Any],
    *,
    hint: str,
    why: str = "the required property does not hold",
) -> None:
    """PASS if ``predicate(student())`` is truthy. The predicate may also return a string: the
    reason for failing (an empty string means pass). A predicate that raises counts as a fail
    (the student's result had the wrong type or shape). When grading, the predicate runs in
    the checker on the plain data the student's code returned."""
    _check(name, hint, student, _value_judge(lambda got: _predicate_reason(predicate, got, why)))


def check_raises(
    name: str, student: Callable[[], Any], exception: type[BaseException] = ValueError, *, hint: str
) -> None:
    """PASS if ``student()`` raises ``exception`` (bad input must be rejected clearly)."""

    def judge(out: _Outcome) -> str | None:
        if out.error:
            return out.error
        if out.raised is None:
            return f"no exception was raised, expected {exception.__name__}"
        return (
            None
            if exception.__name__ in out.raised
            else f"raised {out.raised[0]}, expected {exception.__name__}"
        )

    _check(name, hint, student, judge, expect_raise=True)


def _prediction_order(facts: dict | None) -> str | None:
    """Checker: None if the saved submission shows the prediction made before the measurement,
    else why not. ``facts`` come from the grader's reading of the saved notebook
    (``notebooks.prediction_facts``): ``answer`` and ``measure``, the execution counts of the
    prediction cell and of this measuring cell, and ``changed``, whether this cell's saved output
    says the prediction changed after a measurement in the student's kernel."""
    facts = facts or {}
    answer, measure = facts.get("answer"), facts.get("measure")
    if type(answer) is not int or type(measure) is not int:
        return (
            "the saved notebook does not show your prediction cell run before this measuring "
            "cell (no execution counts)"
        )
    if answer >= measure:
        return "your prediction cell was run after this measuring cell (see their execution counts)"
    if facts.get("changed") is True:
        return "the saved output of this cell shows " + CHANGED
    return None


def check_prediction(
    name: str,
    student: Callable[[], Any],
    measured: float,
    *,
    hint: str,
    rtol: float = 0.05,
) -> None:
    """Predict, then run: PASS if ``student()`` (the prediction, a number written in its own
    answer cell before this cell ran) is within ``rtol`` of ``measured`` (what this cell
    measured), and the prediction came first. Live, the verdict is followed by the measured
    value, and a prediction that changes after the measurement has run in the same kernel fails.
    Graded, the checker also judges the order from the saved notebook: the prediction cell's
    execution count must be below this cell's, and this cell's saved output must not show a
    changed prediction (see ``exercises/README.md``, "Predict, then run")."""
    measured = float(measured)
    pct = f"{100 * rtol:g} %"

    def judge(out: _Outcome) -> str | None:
        if out.error:
            return out.error
        got = out.value
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            return f"returned {type(got).__name__}, expected a number (your prediction)"
        got = float(got)
        if _state.mode == "live":  # every prediction this measurement has seen in this kernel
            seen = _state.seen.setdefault((_state.cell, name), [])
            if got not in seen:
                seen.append(got)
            if len(seen) > 1:
                return CHANGED + " (restart the kernel and run the notebook in order)"
        if not abs(got - measured) <= rtol * abs(measured):
            return f"your prediction is more than {pct} from the measured value"
        return _prediction_order(_state.facts) if _state.mode == "checker" else None

    _check(name, hint, student, judge)
    if _state.mode == "live":  # a count as an integer, anything else to 4 significant digits
        whole = measured.is_integer() and abs(measured) < 1e15
        print(f"{MEASURED}{int(measured):,}" if whole else f"{MEASURED}{measured:.4g}")


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Fresh standard-normal inputs from a private generator: the same numbers on every run,
    independent of the global seed and of anything the student's code did to it."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def randint(low: int, high: int, shape: tuple[int, ...], *, seed: int) -> torch.Tensor:
    """Fresh integer inputs in [low, high) from a private seeded generator (int64)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g)
