"""Static shape checks shared by the Ops' ``make_node`` (the logits' shape as the graph knows it).
"""

from __future__ import annotations

__all__ = ["check_static_square"]


def check_static_square(W, max_m, size_check):
    """Raise ``ValueError`` if the static shape of the (M, M) logits variable ``W`` is not square
    or has M beyond ``max_m`` (unknown dimensions pass: the Ops check them at run time).

    Parameters
    ----------
    W : TensorVariable
        Core logits, ``ndim == 2``.
    max_m : int
        Largest M of this graph.
    size_check : callable
        ``size_check(m)`` raises the message that names the method's limit and the
        alternatives; if it does not raise (M within the method's limit but beyond ``max_m``),
        a ``ValueError`` naming ``max_m`` is raised.
    """
    m0, m1 = W.type.shape
    if m0 is not None and m1 is not None and m0 != m1:
        raise ValueError(f"logits must be square (M, M); got static shape {W.type.shape}")
    for m in (m0, m1):
        if m is not None and m > max_m:
            size_check(m)
            raise ValueError(f"M = {m} is beyond the exact limit {max_m} fixed for this graph")
