"""Render a few panels of the shipped dashboard from the dashboard test's Prometheus data into a PNG.

Not a test: `python tests/deploy/render_panels.py [SERIES.json] [OUT.png]` with matplotlib installed
(it is not a dependency of the project), after tests/deploy/test_dashboard_prometheus.py wrote
bench/out/dashboard-series.json; the default output is docs/images/dashboard-panels.png.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PANELS = ["Files per second", "Queue depth", "Embedding request latency (p50 / p95) and inputs per request",
          "Search latency by tier (p50 / p95)", "Run duration (p50 / p95)", "Degraded search rate"]


def legend(template: str, labels: dict[str, str], expr: str) -> str:
    """A Grafana legendFormat ({{label}}) filled from labels, or the expression's start."""
    if not template:
        return expr[:40]
    for key, value in labels.items():
        template = template.replace("{{" + key + "}}", value)
    return template


def render(series: dict[str, list[dict[str, Any]]], out: Path) -> None:
    """Draw PANELS in a grid of line charts, time relative to the first sample."""
    import matplotlib  # type: ignore[import-not-found, unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    starts = [float(v[0]) for p in series.values() for t in p for r in t["result"] for v in r["values"]]
    origin = min(starts)
    fig, axes = plt.subplots(3, 2, figsize=(12, 10))
    for ax, title in zip(axes.flat, PANELS):
        for target in series[title]:
            for row in target["result"]:
                points = [(float(t) - origin, float(v)) for t, v in row["values"] if v not in ("NaN", "+Inf", "-Inf")]
                if points:
                    xs, ys = zip(*points)
                    ax.plot(xs, ys, label=legend(target["legend"], row["metric"], target["expr"]))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds into the test", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
        ax.tick_params(labelsize=8)
    fig.suptitle("knowledge dashboard, from Prometheus scraping the test's worker, writer and serve processes")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)


def main(argv: list[str]) -> None:
    """Read the series file and write the PNG."""
    source = Path(argv[0]) if argv else REPO / "bench" / "out" / "dashboard-series.json"
    out = Path(argv[1]) if len(argv) > 1 else REPO / "docs" / "images" / "dashboard-panels.png"
    render(json.loads(source.read_text(encoding="utf-8")), out)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1:])
