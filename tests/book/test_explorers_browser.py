"""The chapters' explorers on the built site, in Chromium, offline: every control moves the figure.

On each page with an explorer (course_lib.viz.explorers, marked ``course-vega-explorer``) the
test waits for Vega to draw it from the site's own copy of the libraries (requests to any other
host are refused), then moves each control as a reader would (sets the input's value and
dispatches input/change events, or clicks a radio button). After every move the drawn SVG must
differ from before, and the values the browser computed (read from the live Vega view) must equal
PyTorch's for the setting the view reports: softmax probabilities, loss and gradient (Chapter 6),
rotated vectors (Chapter 2), positional similarities (Chapter 3), attention weights (Chapter 4),
the optimiser's run (Chapter 7).

Uses the site build of tests/book/test_browser.py (``COURSE_BROWSER_BUILD`` to point at your own).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from browser_support import browser_js, open_offline

from course_lib.labs.attention_scaling import softmax_with_temperature
from course_lib.labs.positions import position_similarity
from course_lib.matrices import rotation_matrix
from course_lib.optim import optimise_2d
from course_lib.viz import explorers as E

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MARKER = f'class="{E.EXPLORER_CLASS}"'
# page -> the moves made, in order: (parameter, new value); every control is moved at least once
MOVES = {
    "book/02_matrix_core.html": [("theta_deg", 135), ("theta_deg", 300)],
    "book/03_embeddings.html": [("d_model", 8), ("max_offset", 200), ("p", 0), ("d_model", 256)],
    "book/04_attention.html": [
        ("d_k", 4096),
        ("scaling", "no scaling"),
        ("log10_factor", -1),
        ("d_k", 4),
    ],
    "book/06_cross_entropy.html": [("z_target", -1.5), ("z_other", 2.25), ("z_target", 5)],
    "book/07_gradients.html": [
        ("log10_lr", -1),
        ("optimiser", "Adam"),
        ("surface", "rosenbrock"),
        ("optimiser", "momentum"),
    ],
}

# Move one control: a select or range input by value plus input/change events, a radio by click.
MOVE_JS = browser_js("explorer-move.js")

# The live view's parameters and every dataset (rows without nested objects).
STATE_JS = browser_js("explorer-state.js")

SVG_JS = browser_js("explorer-svg.js")


@pytest.fixture(scope="session")
def page_factory(browser, base_url):
    """open_page(path) -> (context, page, problems): a page of the built site, offline."""

    def open_page(path: str):
        return open_offline(browser, base_url, path)

    return open_page


def test_explorer_pages_are_the_expected_ones(site_dir):
    found = sorted(
        p.relative_to(site_dir).as_posix()
        for p in site_dir.rglob("*.html")
        if MARKER in p.read_text(encoding="utf-8", errors="replace")
    )
    assert found == sorted(MOVES), found
    for path in found:
        html = (site_dir / path).read_text(encoding="utf-8")
        assert html.count(MARKER) == 1, f"{path}: expected one explorer"
        head = html.split("</head>", 1)[0]
        for lib in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
            assert f"_static/course-assets/vega/{lib}" in head, f"{path}: {lib} not loaded"
    for other in site_dir.rglob("*.html"):  # and nowhere else
        if other.relative_to(site_dir).as_posix() not in MOVES:
            assert "course-assets/vega/" not in other.read_text(
                encoding="utf-8", errors="replace"
            ), other


@pytest.mark.parametrize("path", sorted(MOVES))
def test_every_control_moves_the_figure(path, page_factory):
    context, page, problems = page_factory(path)
    try:
        root = page.locator(f".{E.EXPLORER_CLASS}")
        page.wait_for_selector(f".{E.EXPLORER_CLASS}[data-ready='true'] svg", timeout=30_000)
        div_id = root.get_attribute("id")
        chart = root.locator(".course-vega-chart")
        assert chart.get_attribute("role") == "img" and chart.get_attribute("aria-label")
        names = {
            el.get_attribute("name") for el in root.locator(".course-vega-controls [name]").all()
        }
        assert names == {name for name, _ in MOVES[path]}, f"{path}: controls {names}"
        check_values(path, page.evaluate(STATE_JS, div_id))  # the initial setting too
        for name, value in MOVES[path]:
            before = page.evaluate(SVG_JS, div_id)
            assert page.evaluate(MOVE_JS, [div_id, name, value]), f"{path}: no control {name}"
            state = page.evaluate(STATE_JS, div_id)
            assert _same(state["params"][name], value), f"{path}: {name} is {state['params'][name]}"
            assert page.evaluate(SVG_JS, div_id) != before, f"{path}: moving {name} changed nothing"
            check_values(path, state)
        assert not problems, f"{path}: {problems}"
    finally:
        context.close()


def _same(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), abs_tol=1e-9)
    except (TypeError, ValueError):
        return a == b


def _rows(data: dict, *fields: str) -> list[dict]:
    for rows in data.values():
        if rows and all(f in rows[0] for f in fields):
            return rows
    raise AssertionError(f"no dataset with {fields}")


def check_values(path: str, state: dict) -> None:
    """The browser's numbers for the view's current parameters equal PyTorch's, and its title
    prints them as Python would."""
    s, data = state["params"], state["data"]
    assert state["title"] == expected_title(path, s), state["title"]
    if path.endswith("02_matrix_core.html"):
        R = rotation_matrix(math.radians(float(s["theta_deg"]))).double()  # (2, 2)
        got = {r["vector"]: [r["rx"], r["ry"]] for r in _rows(data, "rx", "ry")}
        assert got["R [1, 0]"] == pytest.approx(R[:, 0].tolist(), abs=1e-6)
        assert got["R [0, 1]"] == pytest.approx(R[:, 1].tolist(), abs=1e-6)
    elif path.endswith("03_embeddings.html"):
        rows = sorted(_rows(data, "k", "pe_similarity"), key=lambda r: r["k"])
        ks = [r["k"] for r in rows]
        assert ks == list(range(int(s["max_offset"]) + 1))
        expected = position_similarity(int(s["d_model"]), ks, p=int(s["p"]))  # (K,)
        got = torch.tensor([r["pe_similarity"] for r in rows], dtype=torch.float64)
        assert torch.allclose(got, expected, atol=2e-5)
    elif path.endswith("04_attention.html"):
        d_k = int(s["d_k"])
        scale = 10 ** float(s["log10_factor"]) / (
            math.sqrt(d_k) if s["scaling"] == E.SCALINGS[0] else 1.0
        )
        expected = softmax_with_temperature(E.attention_scores(d_k).double(), scale)  # (8,)
        rows = sorted(_rows(data, "key", "weight"), key=lambda r: r["key"])
        got = torch.tensor([r["weight"] for r in rows], dtype=torch.float64)
        assert torch.allclose(got, expected, atol=1e-5), (s, got, expected)
    elif path.endswith("06_cross_entropy.html"):
        z = torch.tensor(
            [[float(s["z_target"]), float(s["z_other"])]], dtype=torch.float64, requires_grad=True
        )
        loss = F.cross_entropy(z, torch.tensor([0]))
        (grad,) = torch.autograd.grad(loss, z)  # (1, 2)
        here = _rows(data, "loss_here")[0]
        assert here["loss_here"] == pytest.approx(loss.item(), rel=1e-12, abs=1e-12)
        assert here["grad_here"] == pytest.approx(grad[0, 0].item(), rel=1e-12, abs=1e-12)
        probs = {r["cls"]: r["p_class"] for r in _rows(data, "p_class")}
        p = torch.softmax(z.detach()[0], dim=0)  # (2,)
        assert [probs["target"], probs["other"]] == pytest.approx(p.tolist(), rel=1e-12)
    elif path.endswith("07_gradients.html"):
        surface, optimiser, log10_lr = s["surface"], s["optimiser"], round(float(s["log10_lr"]), 1)
        path_, losses = optimise_2d(
            optimiser, 10**log10_lr, steps=60, start=E.STARTS[surface], surface=surface
        )
        status = "diverged" if losses[-1] > losses[0] else f"loss {losses[-1]:.2e}"
        assert _rows(data, "run_label")[0]["run_label"] == f"{len(path_) - 1} steps: {status}"
        points = sorted(_rows(data, "px", "py"), key=lambda r: r["step"])
        assert [points[0]["px"], points[0]["py"]] == pytest.approx(list(E.STARTS[surface]))
        assert [points[-1]["px"], points[-1]["py"]] == pytest.approx(
            path_[(abs(path_) < 1e3).all(axis=1)][-1].tolist(), abs=0.006
        )


def expected_title(path: str, s: dict) -> str:
    """The title the chapter's Python figure had for the same setting."""
    if path.endswith("02_matrix_core.html"):
        R = rotation_matrix(math.radians(float(s["theta_deg"])))  # (2, 2)
        c, sn, ms = (
            f"{round(v, 2) + 0.0:.2f}" for v in (R[0, 0].item(), R[1, 0].item(), -R[1, 0].item())
        )
        return f"θ = {float(s['theta_deg']):.0f}°:  R = [[{c}, {ms}], [{sn}, {c}]]"
    if path.endswith("03_embeddings.html"):
        return f"d_model = {int(s['d_model'])}, starting at p = {int(s['p'])}"
    if path.endswith("04_attention.html"):
        factor = 10 ** float(s["log10_factor"])
        return f"d_k = {int(s['d_k'])}, {s['scaling']}, extra factor {factor:.2f}"
    if path.endswith("06_cross_entropy.html"):
        z = torch.tensor([float(s["z_target"]), float(s["z_other"])], dtype=torch.float64)
        loss = F.cross_entropy(z[None], torch.tensor([0])).item()
        return f"loss = {loss:.3f} nats,  p(target) = {torch.softmax(z, 0)[0].item():.3f}"
    return f"{s['optimiser']}, lr = {10 ** round(float(s['log10_lr']), 1):.3g}"
