"""The figure of Getting started (docs/getting_started.md, section 1): posterior matching marginals.

Runs the page's first example exactly (40 observed matchings of 5 points, two edge features,
NUTS 2 x 500 draws) and draws, for the new pair of point sets of the page, the posterior matching
marginals ``E_theta[p(y[i] = j | theta)]`` (200 posterior draws) next to the posterior of
``theta``.

Usage::

    python examples/getting_started_figure.py --out docs/getting_started_matching.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402

import pm_perm  # noqa: E402
from pm_perm._io import save_figure  # noqa: E402
from pm_perm.matching.model import posterior_matching_marginals  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="outputs/getting_started/getting_started_matching.png")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(0)                        # as on the page
    x = rng.normal(size=(40, 5, 5, 2))
    x[:, range(5), range(5), 0] += 1.5
    y = pm.draw(pm_perm.PermutationExpFamily.dist(x @ [1.0, -0.5]), random_seed=1)
    with pm.Model(coords={"feature": ["x0", "x1"]}):
        theta = pm.Normal("theta", 0, 2, dims="feature")
        pm_perm.PermutationExpFamily("y", logits=pm_perm.edge_logits(x, theta), observed=y)
        idata = pm.sample(500, tune=500, chains=2, random_seed=2, progressbar=False)
    x_new = rng.normal(size=(5, 5, 2))
    x_new[range(5), range(5), 0] += 1.5

    draws = idata.posterior["theta"].values.reshape(-1, 2)
    P = posterior_matching_marginals(x_new[None], draws[::5])[0]

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.8))
    ax0.scatter(draws[:, 0], draws[:, 1], s=4, alpha=0.4)
    ax0.plot([1.0], [-0.5], "r*", markersize=12, label="value the data were drawn from")
    ax0.set(xlabel="theta[x0]", ylabel="theta[x1]", title="posterior of theta (1,000 draws)")
    ax0.legend(loc="lower right", fontsize=8)
    im = ax1.imshow(P, vmin=0, vmax=1, cmap="viridis")
    for i in range(5):
        for j in range(5):
            ax1.text(j, i, f"{P[i, j]:.2f}", ha="center", va="center",
                     color="white" if P[i, j] < 0.6 else "black", fontsize=8)
    ax1.set(xlabel="point j of the second set", ylabel="point i of the first set",
            title="posterior P(y[i] = j), new pair")
    fig.colorbar(im, ax=ax1, fraction=0.046)
    fig.tight_layout()
    save_figure(fig, out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
