"""plot_ppc: the pairwise panel names its pairs (i>j, items numbered as in the first panel)."""

import numpy as np
import pytest

from pm_perm.preferences.plots import _plt, plot_ppc


def _stat(observed):
    observed = np.asarray(observed, dtype=float)
    return {"observed": observed, "lower": observed - 0.01, "upper": observed + 0.01}


def test_ppc_pairwise_panel_labels_the_pairs_by_decreasing_share():
    M = 3
    pairwise = np.array([[0.0, 0.7, 0.2],
                         [0.3, 0.0, 0.6],
                         [0.8, 0.4, 0.0]])  # share of ballots ranking i above j
    ppc = {"first": _stat([0.5, 0.3, 0.2]), "lengths": _stat([0.0, 0.2, 0.3, 0.5]),
           "pairwise": _stat(pairwise)}
    fig, axes = plot_ppc(ppc, ["A", "B", "C"], max_pairs=4)
    try:
        labels = [t.get_text() for t in axes[2].get_xticklabels()]
        # the 4 largest shares: C>A 0.8, A>B 0.7, B>C 0.6, C>B 0.4
        assert labels == ["3>1", "1>2", "2>3", "3>2"]
        dots = axes[2].get_lines()[0].get_ydata()
        np.testing.assert_allclose(dots, [0.8, 0.7, 0.6, 0.4])
        assert "4 largest" in axes[2].get_title()
        assert [t.get_text() for t in axes[0].get_xticklabels()] == ["A", "B", "C"]
        assert len(axes[1].get_xticklabels()) == M + 1
    finally:
        _plt().close(fig)


def test_consensus_heat_orders_items_by_cp_consensus():
    from pm_perm.preferences.plots import plot_consensus_heat

    draws = np.array([[2, 0, 1], [2, 0, 1], [2, 1, 0], [1, 0, 2]])
    fig, ax = plot_consensus_heat(draws, ["a", "b", "c"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["b", "c", "a"]
    np.testing.assert_allclose(ax.images[0].get_array()[0], [0.75, 0.25, 0.0])  # item b
    _plt().close(fig)
    with pytest.raises(ValueError, match="2 names for 3 items"):
        plot_consensus_heat(draws, ["a", "b"])
