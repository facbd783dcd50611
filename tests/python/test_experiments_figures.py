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
