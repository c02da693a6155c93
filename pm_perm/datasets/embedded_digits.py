"""Embedded digits: images holding 1 to 4 distinct digit classes (Swersky et al. 2012, sec. 5.1).

The paper embeds 28 x 28 MNIST digits in a 60 x 60 canvas. MNIST cannot be downloaded here, so
this generator uses the 1,797 8 x 8 digits that ship with scikit-learn
(``sklearn.datasets.load_digits``) and a 40 x 40 canvas: a 4 x 4 grid of 10 x 10 cells, each
digit placed in its cell with a uniform jitter of 0..2 pixels in each direction. Per image the
number of digits is uniform on 1..4, the classes are distinct (at most one instance per class),
the cells are distinct, and each instance is drawn uniformly from the pool of its class.
Train, validation and test images draw their instances from disjoint thirds of the digit pool
(split per class), so test digits were never seen in training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_CLASSES = 10
GRID = 4
CELL = 10
DIGIT = 8
CANVAS = GRID * CELL
MAX_COUNT = 4


@dataclass(frozen=True)
class EmbeddedDigits:
    """One split of the embedded digits data set.

    Attributes
    ----------
    images : ndarray of float64, shape (n, 40, 40)
        Pixel intensities in [0, 1] (overlaps cannot occur: one digit per grid cell).
    labels : ndarray of int64, shape (n, 10)
        ``labels[i, c] = 1`` iff digit class ``c`` appears in image ``i``; 1 to 4 ones per row.
    """

    images: np.ndarray
    labels: np.ndarray

    @property
    def X(self):
        """Flattened images, shape (n, 1600)."""
        return self.images.reshape(len(self.images), -1)

    @property
    def counts(self):
        """Number of digits per image, shape (n,)."""
        return self.labels.sum(axis=1)


def _digit_pool():
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "embedded digits need scikit-learn (pip install 'pm-perm[examples]')"
        ) from err
    digits = load_digits()
    return digits.images / 16.0, digits.target.astype(np.int64)


def _split_pool(images, targets, rng, n_parts=3):
    """Per class, shuffle the instances and cut them into ``n_parts`` disjoint pools."""
    parts = [[[] for _ in range(N_CLASSES)] for _ in range(n_parts)]
    for c in range(N_CLASSES):
        idx = rng.permutation(np.flatnonzero(targets == c))
        for p, chunk in enumerate(np.array_split(idx, n_parts)):
            parts[p][c] = images[chunk]
    return parts


def _render(pool, n, rng):
    images = np.zeros((n, CANVAS, CANVAS))
    labels = np.zeros((n, N_CLASSES), dtype=np.int64)
    counts = rng.integers(1, MAX_COUNT + 1, size=n)
    for i, k in enumerate(counts):
        classes = rng.choice(N_CLASSES, size=k, replace=False)
        cells = rng.choice(GRID * GRID, size=k, replace=False)
        for c, cell in zip(classes, cells, strict=True):
            digit = pool[c][rng.integers(len(pool[c]))]
            r0 = (cell // GRID) * CELL + rng.integers(0, CELL - DIGIT + 1)
            c0 = (cell % GRID) * CELL + rng.integers(0, CELL - DIGIT + 1)
            images[i, r0 : r0 + DIGIT, c0 : c0 + DIGIT] = digit
            labels[i, c] = 1
    return EmbeddedDigits(images, labels)


def make_embedded_digits(n_train=10_000, n_valid=10_000, n_test=10_000, seed=0):
    """Generate the train, validation and test splits of the embedded digits data set.

    Parameters
    ----------
    n_train, n_valid, n_test : int
        Number of images per split (the paper: 10,000 each).
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same three splits.

    Returns
    -------
    train, valid, test : EmbeddedDigits
        Images (n, 40, 40) in [0, 1] and binary labels (n, 10) with 1 to 4 ones per row.

    Notes
    -----
    Cost: O(n), about 5 s for 30,000 images. The count is uniform on 1..4, the classes
    uniform among the subsets of that size, the cells uniform among distinct cells of the
    4 x 4 grid. The splits use disjoint instances (see the module docstring).

    Examples
    --------
    >>> from pm_perm.datasets.embedded_digits import make_embedded_digits
    >>> train, valid, test = make_embedded_digits(20, 5, 5, seed=1)
    >>> train.images.shape, train.labels.shape, int(train.counts.min()) >= 1
    ((20, 40, 40), (20, 10), True)
    """
    for name, n in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)):
        if int(n) != n or n < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
    rng = np.random.default_rng(seed)
    images, targets = _digit_pool()
    pools = _split_pool(images, targets, rng)
    sizes = (n_train, n_valid, n_test)
    return tuple(_render(pool, int(n), rng) for pool, n in zip(pools, sizes, strict=True))


def single_label(labels, seed=0):
    """Keep one label per row, chosen uniformly among its ones (paper sec. 5.3).

    Parameters
    ----------
    labels : array_like of int, shape (n, D)
        Binary labels with at least one 1 per row.
    seed : int
        Seed of the choice.

    Returns
    -------
    ndarray of int64, shape (n,)
        The kept class per row.
    """
    labels = np.asarray(labels)
    if labels.ndim != 2 or np.any(labels.sum(axis=1) < 1):
        raise ValueError("labels must be a (n, D) binary array with at least one 1 per row")
    rng = np.random.default_rng(seed)
    u = rng.random(labels.shape) * (labels == 1)
    return np.argmax(u, axis=1).astype(np.int64)


def grid_cells(images):
    """Cut (n, 40, 40) images into their 16 grid cells, shape (n, 16, 100) (row-major cells)."""
    images = np.asarray(images)
    if images.shape[1:] != (CANVAS, CANVAS):
        raise ValueError(f"images must have shape (n, {CANVAS}, {CANVAS}), got {images.shape}")
    n = len(images)
    cells = images.reshape(n, GRID, CELL, GRID, CELL).transpose(0, 1, 3, 2, 4)
    return cells.reshape(n, GRID * GRID, CELL * CELL)


class CellRBMFeatures:
    """Features for embedded digits: a Bernoulli RBM on grid cells, max- and mean-pooled.

    The paper learns an RBM with 1,000 hidden units on whole 60 x 60 images. With 8 x 8 digits
    and only about 60 training instances per class, a whole-image RBM gives weak features here,
    so this documented substitute shares one RBM (``sklearn.neural_network.BernoulliRBM``)
    across the 16 grid cells: it is fitted on ``n_patches`` cells drawn from the training
    images, and an image's features are the max and the mean over its cells of the hidden
    unit probabilities (2 x ``n_components`` features), standardised with the training mean
    and standard deviation. The features are invariant to where the digits sit on the grid.

    Parameters
    ----------
    n_components : int
        Hidden units of the RBM.
    n_iter : int
        RBM training epochs.
    n_patches : int
        Number of training cells the RBM is fitted on.
    seed : int
        Seed of the patch choice and of the RBM.

    Notes
    -----
    Cost: fit about 10 s for the defaults on one core; transform O(16 n 100 n_components).
    """

    def __init__(self, n_components=200, n_iter=10, n_patches=20_000, seed=0):
        self.n_components = n_components
        self.n_iter = n_iter
        self.n_patches = n_patches
        self.seed = seed

    def fit(self, images):
        """Fit the RBM and the standardisation on training images (n, 40, 40)."""
        from sklearn.neural_network import BernoulliRBM

        cells = grid_cells(images).reshape(-1, CELL * CELL)
        rng = np.random.default_rng(self.seed)
        patches = cells[rng.permutation(len(cells))[: self.n_patches]]
        self.rbm_ = BernoulliRBM(n_components=self.n_components, learning_rate=0.05,
                                 batch_size=50, n_iter=self.n_iter, random_state=self.seed)
        self.rbm_.fit(patches)
        raw = self._pooled(images)
        self.mean_ = raw.mean(axis=0)
        self.scale_ = raw.std(axis=0) + 1e-3
        return self

    def _pooled(self, images):
        cells = grid_cells(images)
        H = self.rbm_.transform(cells.reshape(-1, CELL * CELL)).reshape(len(cells), GRID**2, -1)
        return np.concatenate([H.max(axis=1), H.mean(axis=1)], axis=1)

    def transform(self, images):
        """Standardised pooled features, shape (n, 2 n_components)."""
        return (self._pooled(images) - self.mean_) / self.scale_
