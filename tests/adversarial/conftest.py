"""Helpers for the attack tests, and a check that the host is unchanged after them.

Every test in this directory attacks a defence the way an agent under RL pressure would, and asserts that the
attack fails; where it can be done safely, a twin test switches the defence off and shows the same attack
succeeds, so the first test could not pass vacuously.
"""

from __future__ import annotations

import os

import pytest

from attack_helpers import host_fingerprint


@pytest.fixture(scope="session", autouse=True)
def host_unchanged():
    before = host_fingerprint()
    yield
    after = host_fingerprint()
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not changed, f"the attack tests changed the host: {changed}"


@pytest.fixture
def no_filter(monkeypatch):
    """Switch the filter inside carried paths off (for the twin tests that prove an attack is real)."""
    import envyard.envs.carry as carry_mod

    monkeypatch.setattr(carry_mod, "filter_carried", lambda *a, **k: None)


@pytest.fixture
def secret_env(monkeypatch):
    value = "sk-envyard-test-" + os.urandom(8).hex()
    monkeypatch.setenv("ENVYARD_ATTACK_TEST_SECRET", value)
    return value
