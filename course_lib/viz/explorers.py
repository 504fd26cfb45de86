"""Explorers whose interactivity lives in the figure: Vega-Lite charts with bound parameters.

Each function returns an Altair chart whose sliders and menus are Vega-Lite parameters
(``alt.param(bind=...)``); the quantities the reader changes (softmax, the loss, gradients,
rotated vectors, positional similarities) are computed by the browser from the parameter values
with Vega expressions (``calculate``, ``joinaggregate``, ``aggregate`` transforms), so the
figure moves on the static site, with no kernel behind the page. What cannot be written as an
expression (an optimiser's trajectory is a loop) is precomputed here for every slider value and
selected by the parameter.

``show(chart, alt=...)`` displays one: a MIME bundle with the Vega-Lite spec (for front ends
that render that MIME type themselves) and HTML (a ``<div role="img">`` described by ``alt``,
the controls, and a small ``vegaEmbed`` call). myst-nb puts the HTML on the site (the Vega-Lite
type is not in its priority list), and ``book/_ext/course_vega.py`` serves Vega, Vega-Lite and
vega-embed from the site itself on the pages that contain an explorer (marked by the class
``EXPLORER_CLASS``); a live notebook that runs the HTML loads them from a CDN instead.

The formulas here are the ones of the chapters; ``tests/viz/test_explorers.py`` evaluates them
against PyTorch and ``tests/book/test_explorers_browser.py`` reads the values the browser computed.
"""

from __future__ import annotations

import hashlib
import html
import json
from importlib.resources import files

import altair as alt
import torch

from course_lib.optim import SURFACES, optimise_2d
from course_lib.viz.plotting import COLORS

__all__ = [
    "EXPLORER_CLASS",
    "VEGA_VERSIONS",
    "show",
    "to_html",
    "rotation_explorer",
    "pe_similarity_explorer",
    "attention_weights_explorer",
    "attention_scores",
    "two_class_explorer",
    "optimiser_explorer",
    "optimiser_paths",
]

#: The marker class of an explorer's HTML; book/_ext/course_vega.py looks for it.
EXPLORER_CLASS = "course-vega-explorer"
#: npm versions served by the site (package.json) and loaded from the CDN in a live notebook.
VEGA_VERSIONS = {"vega": "6.4.0", "vega-lite": "6.5.0", "vega-embed": "7.3.0"}
VEGALITE_MIME = f"application/vnd.vegalite.v{alt.SCHEMA_VERSION.lstrip('v').split('.')[0]}+json"

# The script that draws an explorer (a template: %(id)s, %(spec)s and %(libs)s are filled in),
# package data next to this module.
_LOADER = files("course_lib.viz").joinpath("explorer_loader.js").read_text(encoding="utf-8")


def to_html(chart: alt.TopLevelMixin | dict, alt_text: str) -> str:
    """The HTML of an explorer: the chart (``role="img"``, described by ``alt_text``), its
    controls below it, and the ``vegaEmbed`` call that draws it. The id is a hash of the spec,
    so re-running a notebook writes the same output."""
    if not alt_text.strip():
        raise ValueError("show: give alt text describing what the figure shows.")
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    spec_json = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha1((spec_json + alt_text).encode()).hexdigest()[:10]
    div_id = f"course-vega-{digest}"
    libs = [f"{name}@{version}" for name, version in VEGA_VERSIONS.items()]
    # "</" must not appear inside a <script> element.
    script = _LOADER % {
        "id": json.dumps(div_id),
        "spec": spec_json.replace("</", "<\\/"),
        "libs": json.dumps(libs),
    }
    return (
        f'<div class="{EXPLORER_CLASS}" id="{div_id}">'
        # Vega gives the element it draws into its own roles: it draws inside the image.
        f'<div class="course-vega-chart" role="img" aria-label="{html.escape(alt_text)}">'
        f'<div class="course-vega-view"></div></div>'
        f'<div class="course-vega-controls"></div></div>\n'
        # a narrow screen shrinks the drawing (Vega's SVG has a viewBox) instead of the page
        # (charts of width "container" follow the column's width instead)
        f'<style>#{div_id} .course-vega-view {{display: block; width: 100%;}} '
        f'#{div_id} svg {{max-width: 100%; height: auto;}}</style>\n'
        f'<script>\n{script}</script>'
    )


def show(chart: alt.TopLevelMixin, *, alt: str) -> None:
    """Display an explorer with both the Vega-Lite MIME type (front ends that render it) and
    HTML (the built site, and front ends that run the HTML's script). ``alt`` describes the
    figure for screen readers."""
    from IPython.display import display

    spec = chart.to_dict()
    display(
        {
            VEGALITE_MIME: spec,
            "text/html": to_html(spec, alt),
            "text/plain": f"Interactive figure: {alt}",
        },
        raw=True,
    )


def _title(expr: str) -> dict:
    """A chart title computed by the browser from the parameters."""
    return {"text": {"expr": expr}, "fontSize": 13, "fontWeight": "normal"}


def _fmt(expr: str, spec: str) -> str:
    """Vega's format() with an ASCII minus (d3-format writes U+2212), as Python prints it."""
    return f"replace(format({expr}, '{spec}'), '\u2212', '-')"


# ------------------------------------------------------------------ Chapter 2: rotation
def rotation_explorer(theta_deg: int = 90) -> alt.LayerChart:
    """The unit vectors [1, 0] and [0, 1] (dashed) and their images under R(θ) (solid), on the
    unit circle, with a θ slider from 0° to 360° in steps of 15°.

    The browser computes R(θ) v = [cos θ x − sin θ y, sin θ x + cos θ y] for each vector and
    writes the four entries of R(θ) in the title (rounded to 2 decimals, as Chapter 2 prints).
    """
    theta = alt.param(
        name="theta_deg",
        value=theta_deg,
        bind=alt.binding_range(min=0, max=360, step=15, name="θ (degrees)"),
    )
    scale_x = alt.Scale(domain=[-1.4, 1.4], nice=False)
    scale_y = alt.Scale(domain=[-1.4, 1.4], nice=False)
    colour = alt.Color(
        "vector:N",
        title=None,
        scale=alt.Scale(domain=["R [1, 0]", "R [0, 1]"], range=COLORS[:2]),
        legend=alt.Legend(orient="top-left"),
    )
    circle = (
        alt.Chart(alt.sequence(0, 361, as_="deg"))
        .transform_calculate(cx="cos(datum.deg * PI / 180)", cy="sin(datum.deg * PI / 180)")
        .mark_line(color="#999999", strokeDash=[2, 3], strokeWidth=1)
        .encode(
            x=alt.X("cx:Q", scale=scale_x, title="x"),
            y=alt.Y("cy:Q", scale=scale_y, title="y"),
            order="deg:Q",
        )
    )
    vectors = alt.Data(
        values=[
            {"vector": "R [1, 0]", "vx": 1.0, "vy": 0.0, "o": 0.0},
            {"vector": "R [0, 1]", "vx": 0.0, "vy": 1.0, "o": 0.0},
        ]
    )
    before = (
        alt.Chart(vectors)
        .mark_rule(strokeDash=[5, 4], opacity=0.45, strokeWidth=2)
        .encode(
            x=alt.X("o:Q", scale=scale_x),
            y=alt.Y("o:Q", scale=scale_y),
            x2="vx:Q",
            y2="vy:Q",
            color=colour,
        )
    )
    rotated = alt.Chart(vectors).transform_calculate(
        theta_rad="theta_deg * PI / 180",
        rx="cos(datum.theta_rad) * datum.vx - sin(datum.theta_rad) * datum.vy",
        ry="sin(datum.theta_rad) * datum.vx + cos(datum.theta_rad) * datum.vy",
        # a triangle points up; Vega turns it clockwise by `angle` degrees
        head="90 - atan2(datum.ry, datum.rx) * 180 / PI",
    )
    after = rotated.mark_rule(strokeWidth=2.5).encode(
        x=alt.X("o:Q", scale=scale_x),
        y=alt.Y("o:Q", scale=scale_y),
        x2="rx:Q",
        y2="ry:Q",
        color=colour,
    )
    heads = rotated.mark_point(shape="triangle", filled=True, size=110, opacity=1).encode(
        x=alt.X("rx:Q", scale=scale_x),
        y=alt.Y("ry:Q", scale=scale_y),
        angle=alt.Angle("head:Q", scale=None),
        color=colour,
        tooltip=[
            alt.Tooltip("vector:N"),
            alt.Tooltip("rx:Q", format=".3f"),
            alt.Tooltip("ry:Q", format=".3f"),
        ],
    )
    t = "theta_deg * PI / 180"

    def entry(e):
        """Round to 2 decimals first and drop the sign of a zero, as the Python title does."""
        return _fmt(
            f"(abs(round(100 * ({e})) / 100) < 0.005 ? 0 : round(100 * ({e})) / 100)", ".2f"
        )

    c, s, ms = entry(f"cos({t})"), entry(f"sin({t})"), entry(f"-sin({t})")
    title = (
        f"'θ = ' + format(theta_deg, '.0f') + '°:  R = [[' + {c} + ', ' + {ms} + '], ['"
        f" + {s} + ', ' + {c} + ']]'"
    )
    return (
        alt.layer(circle, before, after, heads)
        .add_params(theta)
        .properties(width=290, height=290, title=_title(title))  # with axes: a phone's 358 px
    )


# ------------------------------------------------------------------ Chapter 3: positions
def pe_similarity_explorer(
    d_model: int = 64, p: int = 500, max_offset: int = 100
) -> alt.LayerChart:
    """Cosine similarity of the sinusoidal encoding at position p with the encodings at p + k,
    k = 0 .. max_offset, for a chosen width d_model (menu 8 .. 256), start p (0 .. 1000, step 50)
    and largest offset (10 .. 200, step 10).

    The browser evaluates the formula of ``course_lib.labs.positions.position_similarity``:
    with ω_i = 10000^(−2i/d) and PE(p) = (sin pω_i, cos pω_i)_i, every encoding has length
    √(d/2), so cos(PE(p), PE(p + k)) = mean_i [sin pω_i sin (p+k)ω_i + cos pω_i cos (p+k)ω_i].
    """
    width = alt.param(
        name="d_model",
        value=d_model,
        bind=alt.binding_select(options=[8, 16, 32, 64, 128, 256], name="d_model"),
    )
    start = alt.param(
        name="p", value=p, bind=alt.binding_range(min=0, max=1000, step=50, name="start p")
    )
    most = alt.param(
        name="max_offset",
        value=max_offset,
        bind=alt.binding_range(min=10, max=200, step=10, name="max offset"),
    )
    curve = (
        alt.Chart(alt.sequence(0, 201, as_="k"))
        .transform_filter("datum.k <= max_offset")
        .transform_calculate(pair="sequence(0, d_model / 2)")
        .transform_flatten(["pair"])
        .transform_calculate(
            omega="pow(10000, -2 * datum.pair / d_model)",
            term=(
                "sin(p * datum.omega) * sin((p + datum.k) * datum.omega)"
                " + cos(p * datum.omega) * cos((p + datum.k) * datum.omega)"
            ),
        )
        .transform_aggregate(pe_similarity="mean(term)", groupby=["k"])
        .mark_line(color=COLORS[0], strokeWidth=2)
        .encode(
            x=alt.X("k:Q", title="offset k"),
            y=alt.Y(
                "pe_similarity:Q",
                title="cos(PE(p), PE(p + k))",
                scale=alt.Scale(domain=[-1.05, 1.05], nice=False),
            ),
            tooltip=[alt.Tooltip("k:Q"), alt.Tooltip("pe_similarity:Q", format=".3f")],
        )
    )
    zero = (
        alt.Chart(alt.Data(values=[{"y": 0}]))
        .mark_rule(color="#888888", strokeWidth=0.8)
        .encode(y="y:Q")
    )
    return (
        alt.layer(zero, curve)
        .add_params(width, start, most)
        .properties(
            width="container",
            height=260,
            title=_title("'d_model = ' + d_model + ', starting at p = ' + p"),
        )
    )


# ------------------------------------------------------------------ Chapter 4: attention
D_KS = [4, 16, 64, 256, 1024, 4096]
SCALINGS = ["divide by √d_k", "no scaling"]


def attention_scores(d_k: int, n_keys: int = 8, seed: int = 1) -> torch.Tensor:
    """Raw scores k_j · q of one query and ``n_keys`` keys drawn from N(0, 1) in d_k
    dimensions (the same draw for every setting: generator seeded with ``seed``).

    Returns (n_keys,) float32. The explorer ships these; the browser scales them and takes
    the softmax.
    """
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(d_k, generator=gen)  # (d_k,)
    k = torch.randn(n_keys, d_k, generator=gen)  # (n_keys, d_k)
    return k @ q  # (n_keys,)


def attention_weights_explorer(
    d_k: int = 256, scaling: str = SCALINGS[0], log10_factor: float = 0.0
) -> alt.LayerChart:
    """Attention weights of one query over 8 keys: a d_k menu (4 .. 4096), scaling by 1/√d_k
    or none, and an extra factor 10^(−1 .. 1) in steps of 0.1 of its exponent (an inverse
    temperature).

    The data are the raw scores k_j · q for every d_k (48 numbers, ``attention_scores``);
    the browser computes scale = factor / (√d_k or 1) and the softmax
    w_j = exp(scale s_j − max) / Σ exp(scale s − max), and marks the largest weight.
    """
    rows = [
        {"d_k": dk, "key": f"k{j}", "score": round(float(s), 6)}
        for dk in D_KS
        for j, s in enumerate(attention_scores(dk).tolist())
    ]
    dk = alt.param(name="d_k", value=d_k, bind=alt.binding_select(options=D_KS, name="d_k"))
    sc = alt.param(
        name="scaling", value=scaling, bind=alt.binding_radio(options=SCALINGS, name="scores")
    )
    factor = alt.param(
        name="log10_factor",
        value=log10_factor,
        bind=alt.binding_range(min=-1, max=1, step=0.1, name="× factor (log10)"),
    )
    base = (
        alt.Chart(alt.Data(values=rows))
        .transform_filter("datum.d_k == d_k")
        .transform_calculate(
            scale=f"pow(10, log10_factor) / (scaling == '{SCALINGS[0]}' ? sqrt(d_k) : 1)",
            scaled="datum.score * datum.scale",
        )
        .transform_joinaggregate(top="max(scaled)")
        .transform_calculate(e="exp(datum.scaled - datum.top)")
        .transform_joinaggregate(total="sum(e)")
        .transform_calculate(weight="datum.e / datum.total")
        .transform_joinaggregate(max_weight="max(weight)")
    )
    x = alt.X("key:N", title="key", sort=None, axis=alt.Axis(labelAngle=0))
    bars = base.mark_bar().encode(
        x=x,
        y=alt.Y(
            "weight:Q", title="attention weight", scale=alt.Scale(domain=[0, 1.08], nice=False)
        ),
        color=alt.condition(
            "datum.weight == datum.max_weight", alt.value(COLORS[1]), alt.value(COLORS[0])
        ),
        tooltip=[alt.Tooltip("key:N"), alt.Tooltip("weight:Q", format=".3f")],
    )
    labels = base.mark_text(dy=-7, fontSize=10).encode(
        x=x, y="weight:Q", text=alt.Text("weight:Q", format=".2f")
    )
    # the largest weight, written in the top right corner (bar labels give the others)
    top = (
        base.transform_aggregate(max_weight_shown="max(weight)")
        .transform_calculate(label="'max weight ' + " + _fmt("datum.max_weight_shown", ".2f"))
        .mark_text(align="right", baseline="top", fontSize=12)
        .encode(x=alt.value({"expr": "width"}), y=alt.value(2), text="label:N")
    )
    title = "'d_k = ' + d_k + ', ' + scaling + ', extra factor ' + " + _fmt(
        "pow(10, log10_factor)", ".2f"
    )
    return (
        alt.layer(bars, labels, top)
        .add_params(dk, sc, factor)
        .properties(width="container", height=260, title=_title(title))
    )


# ------------------------------------------------------------------ Chapter 6: cross-entropy
def two_class_explorer(z_target: float = 2.0, z_other: float = 0.0) -> alt.HConcatChart:
    """Two-class cross-entropy as the logits move: sliders for the target and the other logit
    (−5 .. 5, step 0.25).

    Left, the loss ℓ(m) = log(1 + e^(−m)) and its gradient ∂ℓ/∂z_y = −1 / (1 + e^m) against the
    margin m = z_y − z_other in [−6, 6] (241 points), with the current logits marked. Right, the
    softmax probabilities p(target) = 1 / (1 + e^(z_other − z_y)) and p(other) = 1 − p(target).
    All computed by the browser from the slider values.
    """
    zt = alt.param(
        name="z_target",
        value=z_target,
        bind=alt.binding_range(min=-5, max=5, step=0.25, name="z target"),
    )
    zo = alt.param(
        name="z_other",
        value=z_other,
        bind=alt.binding_range(min=-5, max=5, step=0.25, name="z other"),
    )
    loss_name, grad_name = "loss log(1 + e^(−m))", "gradient ∂ℓ/∂z_y"
    xs = alt.Scale(domain=[-6, 6], nice=False)
    ys = alt.Scale(domain=[-1.2, 6.2], nice=False)
    curves = (
        alt.Chart(alt.sequence(0, 241, as_="i"))
        .transform_calculate(
            margin="-6 + 0.05 * datum.i",
            **{loss_name: "log(1 + exp(-datum.margin))", grad_name: "-1 / (1 + exp(datum.margin))"},
        )
        .transform_fold([loss_name, grad_name], as_=["curve", "value"])
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("margin:Q", scale=xs, title="margin m = z_y − z_other"),
            y=alt.Y("value:Q", scale=ys, title=None),
            color=alt.Color(
                "curve:N",
                title=None,
                scale=alt.Scale(
                    domain=[loss_name, grad_name, "current logits"],
                    range=[COLORS[0], COLORS[1], COLORS[3]],
                ),
                legend=alt.Legend(orient="top-right"),
            ),
        )
    )
    zero = (
        alt.Chart(alt.Data(values=[{"y": 0}]))
        .mark_rule(color="#888888", strokeWidth=0.8)
        .encode(y=alt.Y("y:Q", scale=ys))
    )
    here = (
        alt.Chart(alt.Data(values=[{"curve": "current logits"}]))
        .transform_calculate(
            margin_here="z_target - z_other",
            loss_here="log(1 + exp(-datum.margin_here))",
            grad_here="-1 / (1 + exp(datum.margin_here))",
        )
        # The sliders reach margins of ±10, the axis ±6: past its end the marker stays at the
        # edge, on the curve, and turns into an arrow pointing the way the margin went.
        .transform_calculate(
            margin_shown="clamp(datum.margin_here, -6, 6)",
            loss_shown="log(1 + exp(-datum.margin_shown))",
            marker=(
                "datum.margin_here < -6 ? 'triangle-left'"
                " : datum.margin_here > 6 ? 'triangle-right' : 'circle'"
            ),
        )
        .mark_point(filled=True, size=90, opacity=1)
        .encode(
            x=alt.X("margin_shown:Q", scale=xs),
            y=alt.Y("loss_shown:Q", scale=ys),
            shape=alt.Shape("marker:N", scale=None, legend=None),
            color="curve:N",
            tooltip=[
                alt.Tooltip("margin_here:Q", format=".2f", title="margin"),
                alt.Tooltip("loss_here:Q", format=".3f", title="loss"),
                alt.Tooltip("grad_here:Q", format=".3f", title="gradient"),
            ],
        )
    )
    left = alt.layer(zero, curves, here).properties(width=270, height=250)
    probs = alt.Chart(alt.Data(values=[{"cls": "target"}, {"cls": "other"}])).transform_calculate(
        p_class=(
            "datum.cls == 'target' ? 1 / (1 + exp(z_other - z_target))"
            " : 1 / (1 + exp(z_target - z_other))"
        )
    )
    px = alt.X("cls:N", sort=["target", "other"], title=None, axis=alt.Axis(labelAngle=0))
    bars = probs.mark_bar(width=60).encode(
        x=px,
        y=alt.Y("p_class:Q", title="probability", scale=alt.Scale(domain=[0, 1.1], nice=False)),
        color=alt.condition("datum.cls == 'target'", alt.value(COLORS[1]), alt.value(COLORS[0])),
    )
    labels = probs.mark_text(dy=-7).encode(
        x=px, y="p_class:Q", text=alt.Text("p_class:Q", format=".3f")
    )
    title = (
        "'loss = ' + "
        + _fmt("log(1 + exp(z_other - z_target))", ".3f")
        + " + ' nats,  p(target) = ' + "
        + _fmt("1 / (1 + exp(z_other - z_target))", ".3f")
    )
    right = alt.layer(bars, labels).properties(width=150, height=250, title=_title(title))
    return alt.hconcat(left, right).add_params(zt, zo).resolve_scale(color="independent")


# ------------------------------------------------------------------ Chapter 7: optimisers
OPTIMISERS = ["SGD", "momentum", "Adam"]
SURFACE_NAMES = ["ravine", "rosenbrock"]
LOG10_LRS = [round(-3.0 + 0.1 * i, 1) for i in range(36)]  # -3.0 .. 0.5, the slider's stops
STARTS = {"ravine": (-4.5, 1.5), "rosenbrock": (-1.5, 2.0)}
#: the surfaces of course_lib.optim.SURFACES as Vega expressions of datum.x, datum.y
SURFACE_EXPR = {
    "ravine": "0.1 * datum.x * datum.x + 2 * datum.y * datum.y",
    "rosenbrock": (
        "0.1 * ((1 - datum.x) * (1 - datum.x)"
        " + 10 * (datum.y - datum.x * datum.x) * (datum.y - datum.x * datum.x))"
    ),
}


def optimiser_paths(steps: int = 60) -> list[dict]:
    """Every trajectory the explorer can show: one row per (optimiser, surface, learning rate
    on the slider's grid), run with ``course_lib.optim.optimise_2d`` from the chapter's start
    points. Each row: ``o``, ``s``, ``l`` (log10 lr), ``n`` (steps run), ``status`` (as the
    chapter prints it) and ``path``, the points as "x,y;x,y;..." (2 decimals, repeated points
    left out; the browser splits it). Points outside |x|, |y| < 1e3 are dropped (as the chapter's
    plot does).
    """
    rows = []
    for surface in SURFACE_NAMES:
        for optimiser in OPTIMISERS:
            for log10_lr in LOG10_LRS:
                path, losses = optimise_2d(
                    optimiser, 10**log10_lr, steps=steps, start=STARTS[surface], surface=surface
                )
                status = "diverged" if losses[-1] > losses[0] else f"loss {losses[-1]:.2e}"
                inside = path[(abs(path) < 1e3).all(axis=1)]  # (n_inside, 2)
                points = [f"{_short(x)},{_short(y)}" for x, y in inside.tolist()]
                # a point equal to the one before it draws nothing: leave it out
                points = [pt for i, pt in enumerate(points) if i == 0 or pt != points[i - 1]]
                rows.append(
                    {
                        "o": optimiser,
                        "s": surface,
                        "l": log10_lr,
                        "n": len(path) - 1,
                        "status": status,
                        "path": ";".join(points),
                    }
                )
    return rows


def _short(v: float) -> str:
    """v to 2 decimals (about a pixel on the plot), without trailing zeros: "-4.5"."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def optimiser_explorer(
    optimiser: str = "SGD", log10_lr: float = -0.4, surface: str = "ravine", steps: int = 60
) -> alt.LayerChart:
    """The path of an optimiser (menu SGD / momentum / Adam) with learning rate 10^(−3 .. 0.5)
    (slider on the log10, step 0.1) on a 2-d loss surface (menu ravine / rosenbrock).

    The background is the loss surface, log(1 + f(x, y)) on a 60 × 40 grid, computed by the
    browser from the formulas of ``course_lib.optim.SURFACES``. The paths are loops, which
    Vega expressions cannot run: all 216 are precomputed (``optimiser_paths``) and the
    parameters pick one.
    """
    opt = alt.param(
        name="optimiser",
        value=optimiser,
        bind=alt.binding_select(options=OPTIMISERS, name="optimiser"),
    )
    lr = alt.param(
        name="log10_lr",
        value=log10_lr,
        bind=alt.binding_range(min=-3.0, max=0.5, step=0.1, name="log10 lr"),
    )
    surf = alt.param(
        name="surface",
        value=surface,
        bind=alt.binding_select(options=SURFACE_NAMES, name="surface"),
    )
    # plot ranges per surface, as expressions of the `surface` parameter
    ranges = {name: SURFACES[name][2] for name in SURFACE_NAMES}

    def pick(index: int) -> str:
        return f"(surface == 'ravine' ? {ranges['ravine'][index]} : {ranges['rosenbrock'][index]})"

    x0, x1, y0, y1 = (pick(i) for i in range(4))
    nx, ny = 60, 40
    grid = (
        alt.Chart(alt.sequence(0, nx, as_="ix"))
        .transform_calculate(iy=f"sequence(0, {ny})")
        .transform_flatten(["iy"])
        .transform_calculate(
            x=f"{x0} + (datum.ix + 0.5) * ({x1} - {x0}) / {nx}",
            y=f"{y0} + (datum.iy + 0.5) * ({y1} - {y0}) / {ny}",
            xa=f"{x0} + datum.ix * ({x1} - {x0}) / {nx}",
            xb=f"{x0} + (datum.ix + 1) * ({x1} - {x0}) / {nx}",
            ya=f"{y0} + datum.iy * ({y1} - {y0}) / {ny}",
            yb=f"{y0} + (datum.iy + 1) * ({y1} - {y0}) / {ny}",
        )
        .transform_calculate(
            surface_loss=(
                f"surface == 'ravine' ? {SURFACE_EXPR['ravine']} : {SURFACE_EXPR['rosenbrock']}"
            ),
            log_loss="log(1 + datum.surface_loss)",
        )
    )
    xs = alt.Scale(domain={"expr": f"[{x0}, {x1}]"}, nice=False, zero=False)
    ys = alt.Scale(domain={"expr": f"[{y0}, {y1}]"}, nice=False, zero=False)
    # Opaque cells stroked in their own colour: translucent cells showed the page through the
    # anti-aliased seams between them (a grid of white lines over the surface).
    shade = alt.Scale(range=["#ffffff", "#8f8f8f"])
    background = grid.mark_rect(strokeWidth=0.6).encode(
        x=alt.X("xa:Q", scale=xs, title="x"),
        x2="xb:Q",
        y=alt.Y("ya:Q", scale=ys, title="y"),
        y2="yb:Q",
        color=alt.Color("log_loss:Q", scale=shade, legend=None),
        stroke=alt.Color("log_loss:Q", scale=shade, legend=None),
    )
    rows = optimiser_paths(steps)
    selected = "datum.o == optimiser && datum.s == surface && abs(datum.l - log10_lr) < 0.05"
    path = (
        alt.Chart(alt.Data(values=rows))
        .transform_filter(selected)
        .transform_calculate(point="split(datum.path, ';')")
        .transform_flatten(["point"])
        .transform_window(step="row_number()")
        .transform_calculate(
            px="toNumber(split(datum.point, ',')[0])", py="toNumber(split(datum.point, ',')[1])"
        )
    )
    line = path.mark_line(
        color=COLORS[0],
        strokeWidth=1.5,
        clip=True,
        point=alt.OverlayMarkDef(size=12, color=COLORS[0]),
    ).encode(x=alt.X("px:Q", scale=xs), y=alt.Y("py:Q", scale=ys), order="step:Q")
    minimum = (
        alt.Chart(
            alt.Data(
                values=[
                    {"s": n, "mx": SURFACES[n][1][0], "my": SURFACES[n][1][1]}
                    for n in SURFACE_NAMES
                ]
            )
        )
        .transform_filter("datum.s == surface")
        .mark_point(shape="diamond", filled=True, size=140, color="black", opacity=1)
        .encode(x=alt.X("mx:Q", scale=xs), y=alt.Y("my:Q", scale=ys), tooltip=alt.value("minimum"))
    )
    run = (
        alt.Chart(alt.Data(values=rows))
        .transform_filter(selected)
        .transform_calculate(run_label="datum.n + ' steps: ' + datum.status")
        .mark_text(align="left", baseline="top", fontSize=12, dx=4, dy=4)
        .encode(x=alt.value(0), y=alt.value(0), text="run_label:N")
    )
    title = "optimiser + ', lr = ' + " + _fmt("pow(10, log10_lr)", ".3~g")
    return (
        alt.layer(background, line, minimum, run)
        .add_params(opt, lr, surf)
        .properties(width="container", height=270, title=_title(title))
    )
