"""envyard.record: the value classes that replaced dataclasses on the CLI's path must keep what callers relied
on — equality, repr, hashing of frozen records, refusal to mutate them, replace, asdict, pickling (the Ray
and Docker backends send specs and results across processes)."""

import copy
import pickle
from pathlib import Path

import pytest

from envyard.record import Record
from envyard.runtime.backend import SandboxSpec
from envyard.runtime.limits import Limits
from envyard.runtime.result import ExecResult
from envyard.store.store import Image, ImageConfig


class Point(Record, frozen=True):
    def __init__(self, x: int, y: int = 0):
        self._set(x=x, y=y)


class Bag(Record):
    def __init__(self, items: list | None = None, inner: Point | None = None):
        self.items = [] if items is None else items
        self.inner = inner


def test_fields_are_the_init_parameters_in_order():
    assert Point._fields == ("x", "y")
    assert ExecResult._fields[:4] == ("exit_code", "stdout_bytes", "stderr_bytes", "duration")
    assert "provenance" in ImageConfig._fields


def test_repr_and_equality_follow_the_fields():
    assert repr(Point(1, 2)) == "Point(x=1, y=2)"
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(2, 1)
    assert Point(1) != (1, 0)  # not a tuple
    assert Limits(memory="1G") == Limits(memory="1G") and Limits() != Limits(pids=10)


def test_frozen_records_are_hashable_and_refuse_assignment():
    assert len({Point(1), Point(1), Point(2)}) == 2
    p = Point(1)
    with pytest.raises(AttributeError, match="frozen"):
        p.x = 5
    with pytest.raises(AttributeError, match="frozen"):
        del p.y
    with pytest.raises(AttributeError, match="frozen"):
        Limits().memory = "1G"
    assert p.x == 1


def test_plain_records_are_mutable_and_unhashable_like_eq_dataclasses():
    b = Bag()
    b.items.append(1)
    assert b.items == [1]
    with pytest.raises(TypeError):
        hash(b)


def test_replace_makes_a_copy_and_validates_again():
    lim = Limits(memory="1G", pids=64)
    assert lim.replace(disk=None, pids=128) == Limits(memory="1G", pids=128)
    assert lim.pids == 64
    with pytest.raises(TypeError):
        lim.replace(colour="red")
    from envyard.errors import BadInput

    with pytest.raises(BadInput):
        lim.replace(pids=1)  # __init__'s checks run on the copy too


def test_asdict_converts_nested_records_and_copies_containers():
    b = Bag([1, [2]], Point(3))
    d = b.asdict()
    assert d == {"items": [1, [2]], "inner": {"x": 3, "y": 0}}
    d["items"][1].append(99)
    assert b.items == [1, [2]]
    img = Image("a:1", ["l1"], ImageConfig(env={"A": "1"}), 1.0)
    assert img.to_dict()["config"]["env"] == {"A": "1"}


def test_records_survive_pickle_and_deepcopy():
    spec = SandboxSpec(image=Image("a:1", ["l1"], ImageConfig(), 1.0), limits=Limits(pids=10), env={"K": "v"})
    for clone in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec)):
        assert clone == spec and clone is not spec
        assert clone.limits == Limits(pids=10)
    frozen = pickle.loads(pickle.dumps(Point(4, 5)))
    assert frozen == Point(4, 5)
    with pytest.raises(AttributeError):
        frozen.x = 1
    r = ExecResult(0, b"out", b"", 0.1, stdout_file=str(Path("/tmp/x")))
    assert pickle.loads(pickle.dumps(r)) == r


def test_defaults_are_fresh_per_instance():
    a, b = ImageConfig(), ImageConfig()
    a.env["X"] = "1"
    assert b.env == {}
    assert SandboxSpec(image=None).limits == Limits()


def test_image_config_from_json_keeps_known_fields_only():
    cfg = ImageConfig.from_json('{"workdir": "/app", "user": "nobody", "future_field": 1}')
    assert (cfg.workdir, cfg.user) == ("/app", "nobody")
