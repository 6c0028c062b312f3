"""VectorTerminalEnv as a gymnasium.vector.VectorEnv: spaces, array types, the vector info convention, the
declared autoreset modes, reset masks, per-env seeds and tasks, gymnasium's own vector wrappers."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from envyard.envs import VectorTerminalEnv
from envyard.errors import BadInput

from test_envs import make_task

SOLVE = "echo 42 > /app/answer.txt"


def check_batch(venv, obs, rewards=None, terms=None, truncs=None, infos=None):
    """What gymnasium's env checker checks of a single env, per batch: types, shapes, spaces."""
    assert isinstance(obs, tuple) and len(obs) == venv.num_envs
    assert venv.observation_space.contains(obs)
    assert all(venv.single_observation_space.contains(o) for o in obs)
    for arr, dtype in ((rewards, np.float64), (terms, np.bool_), (truncs, np.bool_)):
        if arr is not None:
            assert isinstance(arr, np.ndarray) and arr.dtype == dtype and arr.shape == (venv.num_envs,)
    if infos is not None:
        assert isinstance(infos, dict)
        for key, value in infos.items():
            if not key.startswith("_") and not isinstance(value, dict):
                assert isinstance(value, np.ndarray) and value.shape == (venv.num_envs,), key
                mask = infos[f"_{key}"]
                assert mask.dtype == np.bool_ and mask.shape == (venv.num_envs,)


@pytest.fixture
def task(tmp_path):
    return make_task(tmp_path / "t")


def test_is_a_gymnasium_vector_env_with_batched_text_spaces(yard, task):
    venv = VectorTerminalEnv([task] * 3, yard=yard)
    try:
        assert isinstance(venv, VectorEnv) and venv.num_envs == 3
        assert venv.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert venv.single_observation_space == venv.envs[0].observation_space
        assert venv.single_action_space == venv.envs[0].action_space
        # gymnasium batches Text spaces as a Tuple of them
        assert type(venv.observation_space).__name__ == "Tuple" and len(venv.observation_space) == 3
        assert type(venv.action_space).__name__ == "Tuple" and len(venv.action_space) == 3
        sample = venv.action_space.sample()
        assert venv.action_space.contains(sample) and len(sample) == 3

        obs, infos = venv.reset(seed=7)
        check_batch(venv, obs, infos=infos)
        assert all("Write 42" in o for o in obs)
        assert infos["task"].tolist() == ["answer"] * 3 and infos["_task"].all()
        assert infos["infra_error"].tolist() == [None] * 3
        assert [e.np_random_seed for e in venv.envs] == [7, 8, 9]

        obs, rewards, terms, truncs, infos = venv.step((SOLVE, "true", "exit 3"))
        check_batch(venv, obs, rewards, terms, truncs, infos)
        assert rewards.tolist() == [0.0] * 3 and not terms.any() and not truncs.any()
        assert infos["exit_code"].dtype == np.int64 and infos["exit_code"].tolist() == [0, 0, 3]

        obs, rewards, terms, truncs, infos = venv.step(["submit", "submit", "ls"])
        check_batch(venv, obs, rewards, terms, truncs, infos)
        assert rewards.tolist() == [1.0, 0.0, 0.0] and terms.tolist() == [True, True, False]
        # the verdict's keys only for the envs that finished: the masks say which
        assert infos["_verifier_exit_code"].tolist() == [True, True, False]
        assert infos["reward"].tolist()[:2] == [1.0, 0.0]

        # NEXT_STEP: the next step of an ended env resets it (its action ignored), reward 0, flags false
        obs, rewards, terms, truncs, infos = venv.step(["rm -rf /", "rm -rf /", "submit"])
        check_batch(venv, obs, rewards, terms, truncs, infos)
        assert "Write 42" in obs[0] and "Write 42" in obs[1]
        assert rewards.tolist() == [0.0, 0.0, 0.0] and terms.tolist() == [False, False, True]
        assert infos["_task"].tolist() == [True, True, False]
        obs, rewards, terms, _, _ = venv.step([SOLVE, "submit", "true"])
        assert "Write 42" in obs[2] and terms.tolist() == [False, True, False]
        assert rewards.tolist() == [0.0, 0.0, 0.0]  # env 1's fresh sandbox has no answer
    finally:
        venv.close()
    assert venv.closed
    venv.close()  # idempotent


def test_same_step_autoreset_reports_the_final_observation_and_info(yard, task):
    venv = VectorTerminalEnv([task] * 2, yard=yard, autoreset_mode="SameStep")
    try:
        assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        venv.reset()
        obs, rewards, terms, truncs, infos = venv.step([SOLVE, "true"])
        assert "final_obs" not in infos
        obs, rewards, terms, truncs, infos = venv.step(["submit", "true"])
        assert rewards.tolist() == [1.0, 0.0] and terms.tolist() == [True, False]
        assert "Write 42" in obs[0]  # already the next episode
        assert infos["_final_obs"].tolist() == [True, False]
        assert infos["final_info"]["reward"][0] == 1.0 and infos["final_info"]["_reward"].tolist() == [True, False]
        obs, rewards, terms, _, _ = venv.step(["submit", "submit"])
        assert rewards.tolist() == [0.0, 0.0] and terms.all()  # env 0 really was reset
    finally:
        venv.close()


def test_disabled_autoreset_and_reset_mask(yard, task, tmp_path):
    other = make_task(tmp_path / "other", name="other")
    venv = VectorTerminalEnv([task] * 2, yard=yard, autoreset_mode=AutoresetMode.DISABLED)
    try:
        obs, infos = venv.reset(options={"tasks": [None, other]})
        assert infos["task"].tolist() == ["answer", "other"]
        _, rewards, terms, _, _ = venv.step(["submit", SOLVE])
        assert terms.tolist() == [True, False]
        obs2, rewards, terms, _, infos = venv.step(["true", "true"])
        assert terms.tolist() == [True, False] and obs2[0] == obs[0]  # no auto-reset: still over
        assert infos["note"][0] == "episode is over; call reset()"
        obs3, infos = venv.reset(options={"reset_mask": np.array([True, False])})
        assert obs3[1] == obs2[1] and infos["_task"].tolist() == [True, False]
        _, rewards, terms, _, _ = venv.step(["true", "submit"])
        assert rewards.tolist() == [0.0, 1.0] and terms.tolist() == [False, True]
        for bad in ({"options": {"reset_mask": np.array([False, False])}}, {"options": {"reset_mask": [1, 0]}},
                    {"seed": [1, 2, 3]}, {"options": {"tasks": [task]}}):
            with pytest.raises(BadInput):
                venv.reset(**bad)
        with pytest.raises(BadInput):
            venv.step(["true"])
        with pytest.raises(BadInput):
            venv.step([1, 2])
    finally:
        venv.close()
    with pytest.raises(BadInput):
        VectorTerminalEnv([task], yard=yard, autoreset_mode="sometimes")


def test_gymnasium_vector_wrapper_records_episode_statistics(yard, task):
    venv = RecordEpisodeStatistics(VectorTerminalEnv([task] * 2, yard=yard))
    try:
        venv.reset(seed=0)
        venv.step([SOLVE, "true"])
        _, rewards, terms, _, infos = venv.step(["submit", "submit"])
        assert terms.all()
        assert infos["episode"]["r"].tolist() == [1.0, 0.0]
        assert infos["episode"]["l"].tolist() == [2, 2]
    finally:
        venv.close()


def test_send_recv_use_the_same_arrays_and_autoreset(yard, task):
    venv = VectorTerminalEnv([task] * 2, yard=yard)
    try:
        venv.reset()
        venv.send(["submit"], [1])
        obs, rewards, terms, truncs, infos, ids = venv.recv()
        assert ids.tolist() == [1] and rewards.tolist() == [0.0] and terms.tolist() == [True]
        assert isinstance(obs, tuple) and infos["_reward"].tolist() == [True]
        venv.send(["ignored"], [1])  # NEXT_STEP: this is the reset
        obs, rewards, terms, _, infos, ids = venv.recv()
        assert "Write 42" in obs[0] and not terms.any() and infos["task"].tolist() == ["answer"]
        empty = venv.recv()  # nothing in flight
        assert empty[0] == () and empty[5].size == 0 and empty[4] == {}
    finally:
        venv.close()
