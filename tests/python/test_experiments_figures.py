"""Figures of a sweep: no legend over data, log axes where values span decades, a CCDF for the
tails, and no figure wider than the report shows it (so its text keeps its size)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from repflow.experiments import figures as fg
from repflow.experiments.analysis import Loaded, point_metrics


def _loaded() -> Loaded:
    rng = np.random.default_rng(1)
    rows, fcts, sds = [], {}, {}
    for scheme, scale in (("tcp", 1.0), ("repflow", 0.6), ("pfabric", 0.02)):
        for load in (0.2, 0.5, 0.8):
            for seed in (1, 2):
                n = 400
                size = np.where(rng.random(n) < 0.7, 20_000, 2_000_000)
                # slowdowns from ~1 (pfabric) to hundreds (tcp at 0.8): several decades
                slow = 1.0 + rng.exponential(scale * 300 * load**3, n)
                ideal = size * 8 / 1e9
                flows = pd.DataFrame({"size": size, "fct": ideal * slow, "slowdown": slow,
                                      "bytes_sent": size})  # fmt: skip
                m = point_metrics(flows, 100_000)
                rows.append({"scheme": scheme, "series": scheme, "workload": "websearch",
                             "load": load, "seed": seed, **m, "overhead": 0.0,
                             "collision_frac": np.nan})  # fmt: skip
                short = flows[flows["size"] <= 100_000]
                k = ("websearch", scheme, load)
                fcts[k] = np.concatenate([fcts.get(k, []), short["fct"]])
                sds[k] = np.concatenate([sds.get(k, []), short["slowdown"]])
    sweep = {"spec": {"figures": {"baseline": "tcp", "model": False}}}
    loaded = Loaded(sweep=sweep, points=pd.DataFrame(rows))
    loaded.short_fcts, loaded.short_slowdowns = fcts, sds
    return loaded


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("figs")
    kept = []
    save = fg._save

    def keep(fig, where, name):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        kept.append({
            "name": name,
            "legends": [lg.get_window_extent(renderer) for lg in fig.legends],
            "axes": [(ax.get_window_extent(renderer), ax.get_legend(), ax.get_yscale(),
                      ax.get_xscale(), ax.get_title(),
                      [t.get_fontsize() for t in ax.get_yticklabels()]) for ax in fig.axes],
        })  # fmt: skip
        return save(fig, where, name)

    fg._save = keep
    try:
        figures = fg.make_figures(_loaded(), out)
    finally:
        fg._save = save
    return figures, {k["name"]: k for k in kept}


def test_no_legend_sits_over_an_axes(drawn):
    _figures, kept = drawn
    for name, k in kept.items():
        for bbox, legend, *_ in k["axes"]:
            assert legend is None, name  # no legend inside any axes
            for lg in k["legends"]:
                assert not bbox.overlaps(lg), name


def test_values_spanning_decades_get_a_log_axis(drawn):
    _figures, kept = drawn
    axes = {a[4]: a for a in kept["websearch_slowdown"]["axes"]}
    assert axes["(0, 100KB]: 99th percentile"][2] == "log"
    ccdf = kept["websearch_ccdf"]["axes"]
    assert ccdf and all(a[2] == "log" and a[3] == "log" for a in ccdf)


def test_figures_fit_the_report_column_and_keep_readable_text(drawn):
    figures, kept = drawn
    assert {f.name for f in figures} >= {"websearch_fct", "websearch_slowdown",
                                         "websearch_gain", "websearch_cdf", "websearch_ccdf"}
    for f in figures:
        width, _h = Image.open(f.png).size
        assert width <= fg.MAX_WIDTH_PX, f.name  # shown 1:1 in the 1250 px HTML column
    for name, k in kept.items():
        for *_, sizes in k["axes"]:
            # at 110 dpi shown 1:1, 11 pt is 17 px: well above the ~7 px the old figures had
            assert all(s * fg.DPI / 72 >= 15 for s in sizes), name


def _single_load() -> Loaded:
    """Six long-named series at one load (as fa-dctcp), one equal to another, one of them with
    an outlier, and a TCP far below the others' reduction."""
    rng = np.random.default_rng(3)
    rows, fcts, sds = [], {}, {}
    base = {}
    names = [("dctcp-250KB", 1.0), ("fa-dctcp-250KB", 0.7), ("dctcp-1MB-long-label", 1.2),
             ("fa-dctcp-1MB-long-label", 0.8), ("tcp", 40.0), ("copy-of-fa", 0.7)]
    for scheme, scale in names:
        for seed in (1, 2):
            key = (seed, scale)
            if key not in base:
                base[key] = 1.0 + rng.exponential(scale * 5, 500)
            slow = base[key].copy()
            if scheme == "dctcp-250KB" and seed == 1:
                slow[0] = 5e4  # one flow 10,000× slower than the bulk
            size = np.full(500, 20_000)
            flows = pd.DataFrame({"size": size, "fct": size * 8 / 1e9 * slow, "slowdown": slow,
                                  "bytes_sent": size})  # fmt: skip
            m = point_metrics(flows, 100_000)
            rows.append({"scheme": scheme, "series": scheme, "workload": "short-flows",
                         "load": 0.02, "seed": seed, **m, "overhead": 0.0,
                         "collision_frac": np.nan})  # fmt: skip
            k = ("short-flows", scheme, 0.02)
            fcts[k] = np.concatenate([fcts.get(k, []), flows["fct"]])
            sds[k] = np.concatenate([sds.get(k, []), flows["slowdown"]])
    sweep = {"spec": {"figures": {"baseline": "dctcp-250KB", "model": False}}}
    loaded = Loaded(sweep=sweep, points=pd.DataFrame(rows))
    loaded.short_fcts, loaded.short_slowdowns = fcts, sds
    return loaded


def test_one_load_is_a_category_axis_and_nothing_is_hidden_or_clipped(tmp_path):
    kept = {}
    save = fg._save

    def keep(fig, where, name):
        fig.canvas.draw()
        kept[name] = {"ticks": [[t.get_text() for t in ax.get_xticklabels()] for ax in fig.axes],
                      "xlim": [ax.get_xlim() for ax in fig.axes],
                      "suptitle": fig._suptitle.get_text() if fig._suptitle else ""}
        return save(fig, where, name)

    fg._save = keep
    try:
        figures = {f.name: f for f in fg.make_figures(_single_load(), tmp_path)}
    finally:
        fg._save = save
    fct = kept["short-flows_fct"]
    # schemes side by side, not spread around a load axis
    assert "fa-dctcp-250KB" in fct["ticks"][0] and all(lo < 0 for lo, _ in fct["xlim"][:4])
    assert "per scheme at load 0.02" in fct["suptitle"].replace("\n", " ")
    # the identical series is named, in the figure and in the report's caption
    assert "fa-dctcp-250KB is hidden under copy-of-fa" in figures["short-flows_fct"].title
    # TCP's −3,900 % does not squash the reduction axis: it is named instead
    assert "tcp (mean)" in kept["short-flows_gain"]["suptitle"].replace("\n", " ")
    # the outlier does not stretch the CDF's axis: it is counted in the title
    cdf_titles = " ".join(figures["short-flows_cdf"].title for _ in [0])
    assert figures["short-flows_cdf"].png.is_file() and cdf_titles
    for f in figures.values():
        assert Image.open(f.png).size[0] <= fg.MAX_WIDTH_PX, f.name


def test_offsets_stay_within_a_marker_of_the_load():
    order = [f"s{i}" for i in range(6)]
    off = fg._offsets(order, [0.01, 0.03, 0.05, 0.08])
    assert max(abs(v) for v in off.values()) <= 0.013 * 0.07
