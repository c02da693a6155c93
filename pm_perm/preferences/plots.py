"""Figures of a ranking analysis (matplotlib; inputs from :mod:`pm_perm.preferences.analysis`).

Each function returns ``(fig, axes)`` and leaves saving to the caller; :func:`save_all` writes
the standard set used by ``pm-perm preferences --plots`` and the guide's example.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FIGURES = ("positions.png", "pairwise.png", "consensus.png", "ppc.png", "blocs.png")

__all__ = ["FIGURES", "plot_bloc_profiles", "plot_consensus", "plot_consensus_heat",
           "plot_pairwise", "plot_position_heatmap", "plot_ppc", "save_all"]


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _item_order(P):
    """Items sorted by expected position (best first)."""
    return np.argsort(P @ np.arange(P.shape[1]), kind="stable")


def plot_position_heatmap(P, item_names, *, ax=None, title="P(item at position)", order=None):
    """Heat map of the item x position marginals ``P`` (M, M), items by expected position (or
    in the given ``order``, the items first to last); the top-k model's (M, K + 1): the last
    column "out" (not in the top K)."""
    plt = _plt()
    fig, ax = (plt.subplots(figsize=(0.45 * len(P) + 3, 0.35 * len(P) + 1.5)) if ax is None
               else (ax.figure, ax))
    order = _item_order(P) if order is None else np.asarray(order)
    im = ax.imshow(P[order], cmap="viridis", vmin=0, aspect="auto")
    ax.set_yticks(range(len(P)), [item_names[i] for i in order], fontsize=8)
    labels = [str(j + 1) for j in range(P.shape[1])]
    if P.shape[1] != P.shape[0]:  # top-k: positions 1..K, then "not in the top K"
        labels[-1] = "out"
    ax.set_xticks(range(P.shape[1]), labels, fontsize=8)
    ax.set(xlabel="position (1 = first)", title=title)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig, ax


def plot_consensus_heat(posterior, item_names=None, *, var_name="rho", ax=None):
    """Heat map of P(item at rank) for a latent consensus ranking, items in the order of the
    CP consensus (:mod:`pm_perm.preferences.consensus`; ``posterior`` and ``var_name`` as
    :func:`~pm_perm.preferences.consensus.rank_draws`; ``item_names`` default ``"1" .. "n"``)."""
    from pm_perm.preferences.consensus import cp_consensus, heat_matrix

    H = heat_matrix(posterior, var_name)
    names = [str(i + 1) for i in range(len(H))] if item_names is None else list(item_names)
    if len(names) != len(H):
        raise ValueError(f"item_names has {len(names)} names for {len(H)} items")
    return plot_position_heatmap(H, names, ax=ax, order=cp_consensus(posterior, var_name).order,
                                 title="P(item at rank), items by CP consensus")


def plot_pairwise(Q, item_names, *, order=None, ax=None):
    """Heat map of ``Q[i, j]`` = P(i ranked above j) (rows above columns)."""
    plt = _plt()
    M = len(Q)
    fig, ax = (plt.subplots(figsize=(0.4 * M + 3, 0.4 * M + 2)) if ax is None
               else (ax.figure, ax))
    order = np.argsort(-Q.sum(axis=1), kind="stable") if order is None else np.asarray(order)
    im = ax.imshow(Q[np.ix_(order, order)], cmap="RdBu_r", vmin=0, vmax=1)
    names = [item_names[i] for i in order]
    ax.set_yticks(range(M), names, fontsize=8)
    ax.set_xticks(range(M), names, rotation=90, fontsize=8)
    ax.set_title("P(row ranked above column)")
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig, ax


def plot_consensus(consensus, item_names, *, ax=None, max_items=6):
    """Bar chart of the most probable consensus orders (from ``consensus_posterior``).

    Each bar is labelled with its order's first ``max_items`` items (all with ``None``); the
    figure widens with the labels (pass short ``item_names`` for long orders)."""
    plt = _plt()
    n = max((len(order) for order, _ in consensus), default=0)
    shown = n if max_items is None else min(max_items, n)
    labels = [" > ".join(item_names[i] for i in order[:shown])
              + (" > ..." if len(order) > shown else "") for order, _ in consensus]
    width = 4.5 + 0.06 * max((len(x) for x in labels), default=0)
    fig, ax = (plt.subplots(figsize=(width, 0.5 * len(consensus) + 1.2)) if ax is None
               else (ax.figure, ax))
    probs = [p for _, p in consensus]
    ax.barh(range(len(probs)), probs, color="C0")
    ax.set_yticks(range(len(probs)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel="posterior probability of being the consensus (mode)")
    fig.tight_layout()
    return fig, ax


def plot_bloc_profiles(profiles, weights, item_names, *, top=3):
    """One panel per component: P(item in the first ``top`` positions), with the bloc's weight."""
    plt = _plt()
    K, M = profiles.shape[:2]
    fig, axes = plt.subplots(1, K, figsize=(3.2 * K, 0.3 * M + 1.5), sharey=True, squeeze=False)
    for k, ax in enumerate(axes[0]):
        ax.barh(range(M), profiles[k][:, :top].sum(axis=1), color=f"C{k}")
        ax.set(xlim=(0, 1), title=f"bloc {k + 1}: weight {weights[k]:.2f}",
               xlabel=f"P(in top {top})")
    axes[0, 0].set_yticks(range(M), list(item_names), fontsize=8)
    axes[0, 0].invert_yaxis()
    fig.tight_layout()
    return fig, axes


def plot_ppc(ppc, item_names, *, max_pairs=40):
    """Posterior predictive checks: observed (dots) vs replicated 90% intervals (bars).

    Panels: first-preference shares, ballot lengths, and pairwise preference shares of up to
    ``max_pairs`` item pairs (those with the largest observed share, labelled ``i>j`` with the
    items numbered from 1 in ``item_names``' order), from :func:`~pm_perm.preferences.analysis.
    ppc_summary`.
    """
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    M = len(item_names)
    obs_pw = ppc["pairwise"]["observed"]
    iu = np.array([(i, j) for i in range(M) for j in range(M) if i != j])
    pick = iu[np.argsort(-obs_pw[iu[:, 0], iu[:, 1]])[:max_pairs]]
    panels = [("first", np.arange(M), list(item_names), "first-preference share"),
              ("lengths", np.arange(M + 1), [str(k) for k in range(M + 1)],
               "share of ballots ranking k items"),
              ("pairwise", (pick[:, 0], pick[:, 1]), [f"{i + 1}>{j + 1}" for i, j in pick],
               f"share ranking i above j ({len(pick)} largest)")]
    for ax, (key, idx, labels, title) in zip(axes, panels, strict=True):
        s = ppc[key]
        o, lo, hi = s["observed"][idx], s["lower"][idx], s["upper"][idx]
        x = np.arange(len(o))
        ax.vlines(x, lo, hi, color="0.6", lw=4, label="replicated 90%")
        ax.plot(x, o, "o", color="C3", ms=4, label="observed")
        ax.set_title(title)
        ax.set_xticks(x, labels, rotation=90, fontsize=7)
    axes[2].set_xlabel("i>j: items numbered from 1 as in the first panel", fontsize=8)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig, axes


def save_all(directory, *, item_names, marginals, pairwise, consensus, ppc=None, profiles=None,
             weights=None, overwrite=True):
    """Write the standard figures to ``directory`` (created); returns the list of paths.

    ``positions.png``, ``pairwise.png``, ``consensus.png``, and with ``ppc`` ``ppc.png``, with
    ``profiles`` (K > 1) ``blocs.png``. Each file is written atomically
    (:func:`pm_perm._io.save_figure`); with ``overwrite=False`` a file that exists when it is
    written is kept and :class:`pm_perm._io.OutputPathError` raised (the check and the write
    are one step, so two runs writing the same new folder cannot both succeed).
    """
    plt = _plt()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    figs = {"positions.png": plot_position_heatmap(marginals, item_names)[0],
            "pairwise.png": plot_pairwise(pairwise, item_names)[0],
            "consensus.png": plot_consensus(consensus, item_names)[0]}
    if ppc is not None:
        figs["ppc.png"] = plot_ppc(ppc, item_names)[0]
    if profiles is not None and len(profiles) > 1:
        figs["blocs.png"] = plot_bloc_profiles(profiles, weights, item_names)[0]
    from pm_perm._io import save_figure

    paths = []
    for name, fig in figs.items():
        try:
            paths.append(save_figure(fig, out / name, overwrite=overwrite, dpi=110))
        finally:
            plt.close(fig)
    return paths
