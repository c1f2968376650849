"""A kernel's link map as a wafer picture (``wsesim kernel ... --png DIR``): the busiest outgoing link of
every PE of the grid, and one panel per direction (east, west, south, north), in wavelets over the whole
kernel (``wsesim.kernels.linkmap``). Colours span each panel's own range; a flat panel says so.

matplotlib comes through ``output.mpl``; files are written whole (``output.files``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from .files import atomic_write_bytes, prepare_dir
from .mpl import plt

DIRECTIONS = ("east", "west", "south", "north")  # the link map's last axis (wsesim.kernels.linkmap)


def figure_stem(r: Any) -> str:
    """A file stem that tells a sweep's runs apart: kind, algorithm, grid, shape or wavelets, dtype."""
    m, k, n = r.shape
    what = f"{m}x{k}x{n}" if r.wavelets is None else f"b{r.wavelets}"
    return f"links_{r.kind}_{r.algorithm}_{r.rows}x{r.cols}_{what}_{r.dtype}"


def _panel(fig: Any, ax: Any, data: np.ndarray, title: str) -> None:
    low, high = float(data.min()), float(data.max())
    if high - low < 1e-12 * max(abs(high), 1.0):
        title += " (the same everywhere)"
        low, high = low - 0.5, high + 0.5
    im = ax.imshow(data, origin="upper", cmap="inferno", vmin=low, vmax=high, interpolation="nearest",
                   aspect="auto")
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("PE column", fontsize=7)
    ax.set_ylabel("PE row", fontsize=7)
    ax.tick_params(labelsize=6)
    fig.colorbar(im, ax=ax, shrink=0.85).ax.tick_params(labelsize=6)


def kernel_link_figure(r: Any) -> Any:
    """The busiest outgoing link per PE (left) and the four directions (right), for one ``KernelResult``."""
    load = r.link_map.load
    s = r.links
    fig = plt.figure(figsize=(11, 5.2))
    grid = fig.add_gridspec(2, 4, width_ratios=(2.2, 0.1, 1, 1))
    _panel(fig, fig.add_subplot(grid[:, 0]), load.max(axis=-1), "busiest outgoing link per PE (wavelets)")
    for i, name in enumerate(DIRECTIONS):
        _panel(fig, fig.add_subplot(grid[i // 2, 2 + i % 2]), load[..., i], f"{name} (wavelets)")
    what = ("x".join(str(v) for v in r.shape) if r.kind in ("gemm", "gemv")
            else f"{r.shape[1] // r.machine.per_wavelet:,} wavelets per PE,")
    fig.suptitle(f"{r.machine.name} {r.kind} ({r.algorithm}) on {r.rows} x {r.cols} PEs, {what} {r.dtype}: "
                 f"busiest link {s.max_wavelets:,.0f} wavelets, {s.links_used:,} links used, "
                 f"{s.wavelet_hops:,.0f} wavelet-hops", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return fig


def write_kernel_figures(results: list[Any], out: str | Path) -> list[Path]:
    """One PNG per result in ``out`` (made if missing); returns the paths."""
    folder = prepare_dir(out)
    paths = []
    for r in results:
        fig = kernel_link_figure(r)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=120)
        plt.close(fig)
        path = folder / f"{figure_stem(r)}.png"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths
