"""Fixtures of the distribution tests."""

import pytensor
import pytest

from tests.distributions._count_labels import FAST


@pytest.fixture
def fast_mode():
    with pytensor.config.change_flags(mode=FAST):
        yield
