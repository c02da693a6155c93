"""An exception inside a numba kernel called by XLA (pm_perm.backends.jax.cpu_ffi) stops the
JAX computation (issue 53, s.7): numba's C wrapper used to print it and return success, so XLA
went on with results the kernel never wrote."""

import numpy as np
import pytest

from tests._jax import require_jax

jax = require_jax()
jnp = jax.numpy

from pm_perm._numba import cfunc, njit  # noqa: E402
from pm_perm.backends.jax import cpu_ffi  # noqa: E402


@njit
def _raising_body(frame):
    """A handler body that raises ZeroDivisionError (integer division by zero)."""
    zero = frame[0] - frame[0]
    return frame[0] // zero


def test_an_exception_in_a_handler_is_raised_by_jax():
    compiled = cfunc(cpu_ffi._SIGNATURE, cpu_ffi._ffi_handler(_raising_body))
    jax.ffi.register_ffi_target("pm_perm_test_raising", jax.ffi.pycapsule(compiled.address),
                                platform="cpu")
    call = jax.ffi.ffi_call("pm_perm_test_raising", jax.ShapeDtypeStruct((3,), jnp.float32),
                            vmap_method="sequential")
    with pytest.raises(Exception, match="INTERNAL: pm_perm: a numba kernel raised") as info:
        np.asarray(call(jnp.ones(3, dtype=jnp.float32)))
    assert cpu_ffi.HANDLER_RAISED in str(info.value)
    # the real handlers still succeed
    value = cpu_ffi.call("pm_perm_log_permanent", jax.ShapeDtypeStruct((), jnp.float32),
                         jnp.zeros((3, 3), dtype=jnp.float32), vmap_method="sequential")
    np.testing.assert_allclose(float(value), np.log(6.0), rtol=1e-6)
