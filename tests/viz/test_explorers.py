"""The chapters' Vega-Lite explorers (course_lib.viz.explorers): their controls, and the values
the browser computes from them, compared with PyTorch.

The computed values come from Vega itself: each chart is compiled by Vega-Lite and run by Vega
in Node.js (the npm packages the site serves, ``node_modules/``), the parameters are set as a
slider would set them, and every dataset is read back. tests/book/test_explorers_browser.py does the
same through the controls of the built pages in Chromium.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import sinusoidal_positions
from course_lib.labs.attention_scaling import softmax_with_temperature
from course_lib.labs.positions import position_similarity
from course_lib.matrices import rotation_matrix
from course_lib.optim import SURFACES, optimise_2d
from course_lib.viz import explorers as E
from tools import ROOT

NODE = shutil.which("node")
needs_vega = pytest.mark.skipif(
    NODE is None or not (ROOT / "node_modules" / "vega-lite" / "package.json").is_file(),
    reason="needs Node.js and `npm ci` (the vega and vega-lite packages)",
)

# Compile with Vega-Lite, run with Vega (no renderer), set the signals, read every dataset.
EVAL_JS = (ROOT / "tests" / "browser_js" / "vega-eval.mjs").read_text(encoding="utf-8")


def vega_eval(chart, settings: list[dict]) -> list[dict[str, list[dict]]]:
    """For each parameter setting, every dataset of the running Vega view: name -> rows."""
    proc = subprocess.run(
        [NODE, "--input-type=module", "-e", EVAL_JS],
        cwd=ROOT,
        input=json.dumps({"spec": chart.to_dict(), "settings": settings}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def rows_with(datasets: dict[str, list[dict]], *fields: str) -> list[dict]:
    """The rows of the first dataset whose rows carry all ``fields`` (the computed ones)."""
    for rows in datasets.values():
        if rows and all(f in rows[0] for f in fields):
            return rows
    raise AssertionError(f"no dataset has the fields {fields}: {list(datasets)}")


def params(chart) -> dict[str, dict]:
    return {p["name"]: p for p in chart.to_dict()["params"]}


# --------------------------------------------------------------------------- controls
def test_controls_match_the_chapters():
    rot = params(E.rotation_explorer())["theta_deg"]
    assert rot["value"] == 90 and rot["bind"] == {
        "input": "range",
        "min": 0,
        "max": 360,
        "step": 15,
        "name": "θ (degrees)",
    }
    pe = params(E.pe_similarity_explorer())
    assert (
        pe["d_model"]["bind"]["options"] == [8, 16, 32, 64, 128, 256]
        and pe["d_model"]["value"] == 64
    )
    assert (
        pe["p"]["bind"]["min"],
        pe["p"]["bind"]["max"],
        pe["p"]["bind"]["step"],
        pe["p"]["value"],
    ) == (0, 1000, 50, 500)
    mo = pe["max_offset"]["bind"]
    assert (mo["min"], mo["max"], mo["step"], pe["max_offset"]["value"]) == (10, 200, 10, 100)
    att = params(E.attention_weights_explorer())
    assert (
        att["d_k"]["bind"]["options"] == [4, 16, 64, 256, 1024, 4096] and att["d_k"]["value"] == 256
    )
    assert att["scaling"]["bind"] == {
        "input": "radio",
        "options": ["divide by √d_k", "no scaling"],
        "name": "scores",
    }
    f = att["log10_factor"]["bind"]
    assert (f["min"], f["max"], f["step"], att["log10_factor"]["value"]) == (-1, 1, 0.1, 0.0)
    ce = params(E.two_class_explorer())
    for name, value in [("z_target", 2.0), ("z_other", 0.0)]:
        b = ce[name]["bind"]
        assert (b["input"], b["min"], b["max"], b["step"], ce[name]["value"]) == (
            "range",
            -5,
            5,
            0.25,
            value,
        )
    opt = params(optimiser_chart())
    assert opt["optimiser"]["bind"]["options"] == ["SGD", "momentum", "Adam"]
    assert opt["surface"]["bind"]["options"] == ["ravine", "rosenbrock"]
    lr = opt["log10_lr"]["bind"]
    assert (lr["min"], lr["max"], lr["step"], opt["log10_lr"]["value"]) == (-3.0, 0.5, 0.1, -0.4)


def test_html_is_marked_described_and_reproducible():
    chart = E.two_class_explorer()
    html = E.to_html(chart, 'Loss "and" gradient')
    assert f'class="{E.EXPLORER_CLASS}"' in html  # what book/_ext/course_vega.py looks for
    assert 'role="img" aria-label="Loss &quot;and&quot; gradient"' in html
    assert html == E.to_html(E.two_class_explorer(), 'Loss "and" gradient')  # same id each run
    assert "</" not in html.split("<script>", 1)[1].rsplit("</script>", 1)[0]
    with pytest.raises(ValueError, match="alt text"):
        E.to_html(chart, "  ")


# --------------------------------------------------------------------------- Chapter 6
@needs_vega
def test_two_class_loss_softmax_and_gradient_equal_torch():
    settings = [
        {"z_target": 2.0, "z_other": 0.0},
        {"z_target": -3.0, "z_other": 1.25},
        {"z_target": 5.0, "z_other": -5.0},
        {"z_target": 0.5, "z_other": 0.5},
    ]
    for s, data in zip(settings, vega_eval(E.two_class_explorer(), settings)):
        z = torch.tensor([[s["z_target"], s["z_other"]]], dtype=torch.float64, requires_grad=True)
        loss = F.cross_entropy(z, torch.tensor([0]))
        (grad,) = torch.autograd.grad(loss, z)  # (1, 2)
        here = rows_with(data, "loss_here")[0]
        assert here["margin_here"] == pytest.approx(s["z_target"] - s["z_other"])
        assert here["loss_here"] == pytest.approx(loss.item(), rel=1e-12, abs=1e-12)
        assert here["grad_here"] == pytest.approx(grad[0, 0].item(), rel=1e-12, abs=1e-12)
        probs = {r["cls"]: r["p_class"] for r in rows_with(data, "p_class")}
        p = torch.softmax(z.detach()[0], dim=0)  # (2,)
        assert probs["target"] == pytest.approx(p[0].item(), rel=1e-12)
        assert probs["other"] == pytest.approx(p[1].item(), rel=1e-12)
    # the curves: loss and d loss / d z_target against the margin, 241 points on [-6, 6]
    curves = rows_with(data, "curve", "margin", "value")
    loss_rows = [r for r in curves if r["curve"].startswith("loss")]
    grad_rows = [r for r in curves if r["curve"].startswith("gradient")]
    assert len(loss_rows) == len(grad_rows) == 241
    m = torch.tensor([r["margin"] for r in loss_rows], dtype=torch.float64, requires_grad=True)
    assert torch.allclose(m.detach(), torch.linspace(-6, 6, 241, dtype=torch.float64), atol=1e-12)
    z = torch.stack([m, torch.zeros_like(m)], dim=1)  # (241, 2): logits (m, 0)
    losses = F.cross_entropy(z, torch.zeros(241, dtype=torch.long), reduction="none")  # (241,)
    (dm,) = torch.autograd.grad(losses.sum(), m)
    assert torch.allclose(
        torch.tensor([r["value"] for r in loss_rows], dtype=torch.float64),
        losses.detach(),
        rtol=1e-12,
        atol=1e-12,
    )
    assert torch.allclose(
        torch.tensor([r["value"] for r in grad_rows], dtype=torch.float64),
        dm,
        rtol=1e-12,
        atol=1e-12,
    )


# --------------------------------------------------------------------------- Chapter 2
@needs_vega
def test_rotation_equals_rotation_matrix():
    settings = [{"theta_deg": t} for t in (0, 45, 90, 135, 300, 360)]
    for s, data in zip(settings, vega_eval(E.rotation_explorer(), settings)):
        R = rotation_matrix(math.radians(s["theta_deg"])).double()  # (2, 2)
        rows = {r["vector"]: (r["rx"], r["ry"]) for r in rows_with(data, "rx", "ry")}
        assert rows["R [1, 0]"] == pytest.approx(R[:, 0].tolist(), abs=1e-6)
        assert rows["R [0, 1]"] == pytest.approx(R[:, 1].tolist(), abs=1e-6)


# --------------------------------------------------------------------------- Chapter 3
@needs_vega
def test_pe_similarity_equals_position_similarity():
    settings = [
        {"d_model": 64, "p": 500, "max_offset": 100},
        {"d_model": 8, "p": 0, "max_offset": 200},
        {"d_model": 256, "p": 1000, "max_offset": 10},
        {"d_model": 16, "p": 50, "max_offset": 30},
    ]
    for s, data in zip(settings, vega_eval(E.pe_similarity_explorer(), settings)):
        rows = sorted(rows_with(data, "k", "pe_similarity"), key=lambda r: r["k"])
        ks = [r["k"] for r in rows]
        assert ks == list(range(s["max_offset"] + 1))
        expected = position_similarity(s["d_model"], ks, p=s["p"])  # (K,) from float32 encodings
        got = torch.tensor([r["pe_similarity"] for r in rows], dtype=torch.float64)
        assert torch.allclose(got, expected, atol=2e-5), (s, (got - expected).abs().max())
        # and in float64 from the encodings themselves, with torch's cosine similarity
        pe = sinusoidal_positions(s["p"] + s["max_offset"] + 1, s["d_model"]).double()  # (T, d)
        cos = F.cosine_similarity(pe[s["p"]][None], pe[s["p"] :], dim=1)  # (K,)
        assert torch.allclose(got, cos, atol=2e-5)


# --------------------------------------------------------------------------- Chapter 4
@needs_vega
def test_attention_weights_equal_softmax_with_temperature():
    settings = [
        {"d_k": 256, "scaling": "divide by √d_k", "log10_factor": 0.0},
        {"d_k": 4096, "scaling": "no scaling", "log10_factor": 0.0},
        {"d_k": 4, "scaling": "divide by √d_k", "log10_factor": -1.0},
        {"d_k": 64, "scaling": "no scaling", "log10_factor": 0.7},
    ]
    for s, data in zip(settings, vega_eval(E.attention_weights_explorer(), settings)):
        gen = torch.Generator().manual_seed(1)  # the chapter's draw
        q = torch.randn(s["d_k"], generator=gen)  # (d_k,)
        k = torch.randn(8, s["d_k"], generator=gen)  # (8, d_k)
        scale = 10 ** s["log10_factor"] / (
            math.sqrt(s["d_k"]) if s["scaling"] == "divide by √d_k" else 1.0
        )
        expected = softmax_with_temperature((k @ q).double(), scale)  # (8,)
        rows = rows_with(data, "key", "weight")
        got = torch.tensor(
            [r["weight"] for r in sorted(rows, key=lambda r: r["key"])], dtype=torch.float64
        )
        assert torch.allclose(got, expected, atol=1e-5), (s, got, expected)
        assert rows[0]["max_weight"] == pytest.approx(expected.max().item(), abs=1e-5)


# --------------------------------------------------------------------------- Chapter 7
_OPT_CHART: dict = {}


def optimiser_chart():
    """The Chapter 7 explorer, built once (it runs 216 short optimisations)."""
    if "chart" not in _OPT_CHART:
        _OPT_CHART["chart"] = E.optimiser_explorer()
    return _OPT_CHART["chart"]


@needs_vega
def test_optimiser_paths_and_surface_equal_optimise_2d():
    settings = [
        {"optimiser": "SGD", "log10_lr": -0.4, "surface": "ravine"},
        {"optimiser": "Adam", "log10_lr": -1.0, "surface": "rosenbrock"},
        {"optimiser": "momentum", "log10_lr": -2.3, "surface": "ravine"},
        {"optimiser": "SGD", "log10_lr": 0.5, "surface": "ravine"},
    ]  # diverges
    for s, data in zip(settings, vega_eval(optimiser_chart(), settings)):
        path, losses = optimise_2d(
            s["optimiser"],
            10 ** s["log10_lr"],
            steps=60,
            start=E.STARTS[s["surface"]],
            surface=s["surface"],
        )
        points = rows_with(data, "px", "py")
        inside = path[(abs(path) < 1e3).all(axis=1)]  # (n, 2)
        drawn = torch.tensor(
            [[r["px"], r["py"]] for r in sorted(points, key=lambda r: r["step"])],
            dtype=torch.float64,
        )
        # the shipped path is the run rounded to 0.01, with repeated points left out
        rounded = [tuple(round(v, 2) + 0.0 for v in pt) for pt in inside.tolist()]
        kept = [pt for i, pt in enumerate(rounded) if i == 0 or pt != rounded[i - 1]]
        assert drawn.tolist() == [list(pt) for pt in kept]
        label = rows_with(data, "run_label")[0]["run_label"]
        status = "diverged" if losses[-1] > losses[0] else f"loss {losses[-1]:.2e}"
        assert label == f"{len(path) - 1} steps: {status}"
        # the background: the surface's loss at each grid cell, from its formula
        grid = rows_with(data, "surface_loss")
        assert len(grid) == 60 * 40
        f = SURFACES[s["surface"]][0]
        xy = torch.tensor([[r["x"], r["y"]] for r in grid], dtype=torch.float64)
        expected = f(xy[:, 0], xy[:, 1])
        assert torch.allclose(
            torch.tensor([r["surface_loss"] for r in grid], dtype=torch.float64),
            expected,
            rtol=1e-12,
            atol=1e-12,
        )
        x0, x1, y0, y1 = SURFACES[s["surface"]][2]
        assert (
            x0 < xy[:, 0].min()
            and xy[:, 0].max() < x1
            and y0 < xy[:, 1].min()
            and xy[:, 1].max() < y1
        )


def test_optimiser_paths_cover_every_slider_stop():
    rows = E.optimiser_paths(steps=2)
    assert len(rows) == 3 * 36 * 2
    assert sorted({r["l"] for r in rows}) == [round(-3 + 0.1 * i, 1) for i in range(36)]
