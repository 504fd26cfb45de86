"""The run-time form of an exercise's ``forbid`` rule (torch and stdlib only: it runs in the
student's kernel, called by the check helpers).

"Write attention yourself, do not call F.scaled_dot_product_attention" is enforced while the
student's function runs: the check helpers call it under a ``torch.overrides.TorchFunctionMode``
that sees every torch function, tensor method and operator the code reaches, whatever the route
(``F.scaled_dot_product_attention``, an alias, ``getattr(F, "scaled_" + ...)``,
``operator.matmul``, ``a @ b``, a lambda kept in a list), plus global hooks for modules
(``nn.MultiheadAttention``) and optimizers (``torch.optim.AdamW``). A forbidden call is recorded
and refused (``ForbiddenCall``, a BaseException, so ``except Exception`` in the student's code does
not hide it); the check then fails with the name that was called.

The grader sets the names before each exercise's checks (``forbid_calls(...)``, from the
exercise's ``forbid`` metadata); a notebook opened in Jupyter has none set, so nothing is
guarded there (the AST lint gives early, friendly feedback; this is the guard).

Calls made by a torch function the student called are not seen (a mode is off while it
handles a call): only what the student's own code calls counts, so an allowed function that
uses a forbidden one internally stays allowed.
"""

from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

from torch.overrides import TorchFunctionMode

__all__ = ["ForbiddenCall", "forbid_calls", "forbidden", "watching", "normalise"]

_MATMUL = frozenset({"matmul", "rmatmul"})  # what "@" means (a @ b, operator.matmul, torch.matmul)
_forbidden: frozenset[str] = frozenset()


class ForbiddenCall(BaseException):
    """Raised inside the student's code when it calls a function the exercise forbids."""


def normalise(name: str) -> str:
    """The comparable form of a function name: ``__matmul__`` -> ``matmul``, ``addmm_`` ->
    ``addmm``, ``linalg_multi_dot`` -> ``multi_dot``."""
    name = name.strip("_")
    return name[len("linalg_") :] if name.startswith("linalg_") else name


def forbid_calls(names: Iterable[str]) -> None:
    """Set the names the student's code may not call from now on (``"@"`` = matrix product);
    an empty list lifts the rule."""
    global _forbidden
    out: set[str] = set()
    for n in names:
        if not isinstance(n, str) or not n:
            raise ValueError(f"forbid_calls: names must be non-empty strings, got {n!r}.")
        out |= _MATMUL if n == "@" else {n}
    _forbidden = frozenset(out)


def forbidden() -> frozenset[str]:
    return _forbidden


class _Refuse(TorchFunctionMode):
    def __init__(self, names: frozenset[str], hits: list[str]) -> None:
        super().__init__()
        self.names = frozenset(normalise(n) for n in names)
        self.hits = hits

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = normalise(getattr(func, "__name__", "") or "")
        if name in self.names:
            self.hits.append(name)
            raise ForbiddenCall(name)
        return func(*args, **(kwargs or {}))


def _class_hit(obj, names: frozenset[str], hits: list[str]) -> None:
    for cls in type(obj).__mro__:
        if cls.__name__ in names:
            hits.append(cls.__name__)
            raise ForbiddenCall(cls.__name__)


@contextlib.contextmanager
def watching(names: Iterable[str] | None = None) -> Iterator[list[str]]:
    """Run a block with the forbidden names refused; yields the list of names it called
    (empty: none). ``names`` defaults to what ``forbid_calls`` set."""
    names = frozenset(_forbidden if names is None else names)
    hits: list[str] = []
    if not names:
        yield hits
        return
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    module_hook = register_module_forward_pre_hook(lambda m, a: _class_hit(m, names, hits))
    optim_hook = register_optimizer_step_pre_hook(lambda o, a, k: _class_hit(o, names, hits))
    try:
        with _Refuse(names, hits):
            yield hits
    finally:
        module_hook.remove()
        optim_hook.remove()
