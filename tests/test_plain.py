"""webhook/model/plain.py against the standard `dataclasses`: the same objects for every shape aiadmit declares."""

import copy
import dataclasses
import pickle

import pytest

from webhook.model import plain


def _declare(module, frozen=False):
    """The same classes declared with `module`'s decorator (dataclasses or plain)."""
    dataclass, field = module.dataclass, module.field

    @dataclass(frozen=frozen)
    class Point:
        """A point."""
        x: int
        y: int = 0
        tags: list = field(default_factory=list)
        hidden: dict = field(default_factory=dict, repr=False, compare=False)
        label: str = field(default="p")

    @dataclass
    class Derived:
        name: str
        items: tuple = ()
        total: int = field(init=False, default=0)
        seen: list = field(init=False, default_factory=list)

        def __post_init__(self):
            self.total = len(self.items)

    return Point, Derived


@pytest.mark.parametrize("frozen", [False, True])
def test_the_same_objects_as_the_standard_decorator(frozen):
    (SP, SD), (PP, PD) = _declare(dataclasses, frozen), _declare(plain, frozen)
    for args, kwargs in [((1,), {}), ((1, 2), {"tags": ["a"]}), ((3,), {"label": "q", "hidden": {"k": 1}})]:
        standard, ours = SP(*args, **kwargs), PP(*args, **kwargs)
        assert repr(standard) == repr(ours)
        assert vars(standard) == vars(ours)
        assert (ours == PP(*args, **kwargs)) is True
        assert (ours == PP(99)) is False
        assert ours.__eq__(standard) is NotImplemented
    assert PP(1).tags is not PP(1).tags  # a fresh list per object
    assert PP(1, hidden={"a": 1}) == PP(1)  # compare=False
    assert PP.y == SP.y == 0 and PP.label == "p" and not hasattr(PP, "tags")  # class attributes as the standard's
    assert repr(SD("n", (1, 2))) == repr(PD("n", (1, 2)))
    assert PD("n", (1, 2)).total == 2 and PD("n").seen == []
    with pytest.raises(TypeError):
        PD("n", (), 5)  # not an init field
    with pytest.raises(TypeError):
        PP()  # x is required
    assert PP.__doc__ == "A point."


def test_frozen_is_frozen_and_hashable_and_mutable_is_not_hashable():
    [SP, _], [PP, _] = _declare(dataclasses, True), _declare(plain, True)
    point = PP(1, 2)
    with pytest.raises(AttributeError) as raised:
        point.x = 5
    assert isinstance(raised.value, plain.FrozenInstanceError)
    with pytest.raises(AttributeError):
        del point.y
    for cls in (SP, PP):  # a list field makes a frozen instance unhashable, for both
        with pytest.raises(TypeError):
            hash(cls(1))

    @plain.dataclass(frozen=True)
    class Key:
        kind: str
        name: str = ""
        note: str = plain.field(default="", compare=False)

    assert hash(Key("a", "b")) == hash(Key("a", "b", "other note")) == hash(("a", "b"))
    assert {Key("a"), Key("a", note="x")} == {Key("a")}
    [MP, _] = _declare(plain, False)
    with pytest.raises(TypeError):
        hash(MP(1))
    mutable = MP(1)
    mutable.x = 7
    assert mutable.x == 7


@pytest.mark.parametrize("frozen", [False, True])
def test_copies_and_pickles(frozen):
    global Point  # pickle finds a class by its module and name
    Point, _ = _declare(plain, frozen)
    Point.__qualname__ = "Point"
    try:
        point = Point(1, 2, ["t"])
        assert pickle.loads(pickle.dumps(point)) == point
        assert copy.deepcopy(point) == point and copy.deepcopy(point).tags is not point.tags
    finally:
        del Point


def test_what_the_standard_decorator_refuses_is_refused():
    with pytest.raises(ValueError):
        @plain.dataclass
        class Mutable:
            items: list = []
    with pytest.raises(TypeError):
        @plain.dataclass
        class Order:
            a: int = 1
            b: int
    with pytest.raises(ValueError):
        plain.field(default=1, default_factory=int)


def test_inherited_fields_come_first_and_body_methods_are_kept():
    @plain.dataclass
    class Base:
        a: int
        b: int = 2

    @plain.dataclass
    class Child(Base):
        c: int = 3

        def __repr__(self):
            return "child"

    child = Child(1)
    assert (child.a, child.b, child.c) == (1, 2, 3)
    assert repr(child) == "child"
    assert repr(Base(1)) == "test_inherited_fields_come_first_and_body_methods_are_kept.<locals>.Base(a=1, b=2)"
