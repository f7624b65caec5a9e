"""Bounded CEL: the static cost estimate at load (cel/cost.py), the run-time step and size bounds, RE2 regexes.

The three hostile shapes of the issue: a catastrophic regex (RE2 is linear: it answers at once), three nested
all() over the containers (rejected at load by the estimate; stopped at run time by the step bound if the estimate
is lifted), a string doubled again and again (rejected at load; stopped at run time by the size bound).
"""

from __future__ import annotations

import time

import pytest

from webhook.cel.cost import Limits
from webhook.cel.environment import CelError, Expression, new_context
from webhook.language.declarations import CONTAINER

NESTED = ("pod.containers.all(a, pod.containers.all(b, pod.containers.all(c, "
          "a.name != 'x' && b.name != 'x' && c.name != 'x')))")
DOUBLING = "cel.bind(a, container.image + container.image, " + "".join(
    f"cel.bind({n}, {p} + {p}, " for p, n in zip("abcdefgh", "bcdefghi")) + "size(i) > 0" + ")" * 9
UNLIMITED = Limits(per_expression=float("inf"), max_value_factor=float("inf"))


def _context() -> dict:
    context = new_context()
    context["pod"] = {"containers": [{"name": f"c{i}", "image": "x" * 100} for i in range(400)]}
    context["container"] = {"name": "c", "image": "y" * 100_000}
    return context


def test_a_catastrophic_regex_is_linear_in_re2():
    expression = Expression('container.name.matches("(a+)+$")', declarations=CONTAINER)
    context = new_context()
    context["container"] = {"name": "a" * 27 + "!"}
    started = time.thread_time()  # CPU time of this thread: what the bound is about, and what load does not move
    assert expression.run(context) is False
    assert time.thread_time() - started < 0.1  # Python's backtracking re took 23.7 s on this


@pytest.mark.parametrize("source, message", [
    (NESTED, "estimated cost"), (DOUBLING, "doubled again and again"),
    ("size(join(pod.containers.map(a, join(pod.containers.map(b, join(pod.containers.map(c, c.image), ',')), ','))"
     ", ',')) > 0", "estimated cost"),
])
def test_hostile_shapes_fail_the_load_naming_the_cost(source, message):
    with pytest.raises(CelError, match=message):
        Expression(source, declarations=CONTAINER)


def test_what_the_estimate_lets_through_stops_at_the_run_time_bounds_quickly():
    context = _context()
    for source, message in ((NESTED, "comprehension steps"), (DOUBLING, "larger than")):
        expression = Expression(source, declarations=CONTAINER, limits=UNLIMITED)
        started = time.thread_time()  # CPU, not wall: at load average 12 the wall clock failed a 0.2 s run
        with pytest.raises(Exception, match=message):
            expression.run(context)
        assert time.thread_time() - started < 2.0  # 32 s and 1.33 GB before


def test_linear_and_amortised_shapes_load():
    for source in ("pod.containers.all(c, c.env.all(e, e.name.startsWith('A')))",
                   "join(pod.containers.map(c, c.name + ':' + c.image), ', ').size() > 0",
                   "pod.volumes.exists(v, container.volumeMounts.exists(m, m.name == v.name))"):
        Expression(source, declarations=CONTAINER)


@pytest.mark.parametrize("source, outcome", [
    (r'"abc".matches("c\\z")', True),  # RE2's \z (Python's re refused it)
    (r'"é".matches("^\\w$")', False),  # \w is ASCII in RE2 (Python's re: any letter)
    (r'"é".matches("^\\pL$")', True),  # Unicode classes are spelt \pL
    ('"a1b22".find("[0-9]+")', "1"), ('"a1b22".findAll("[0-9]+")', ["1", "22"]),
    ('"a1b22".findAll("[0-9]+", 1)', ["1"]),
])
def test_re2_semantics(source, outcome):
    assert Expression(source).run(new_context()) == outcome


def test_look_behind_fails_the_load():
    with pytest.raises(CelError, match="RE2"):
        Expression('container.name.matches("(?<=a)b")', declarations=CONTAINER)


def test_the_limits_are_configurable_and_a_rule_over_them_does_not_load(tmp_path):
    from webhook.engine.core import Engine
    from webhook.language.policy import PolicyLoadError

    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ncelLimits: {costLimit: 1000}\n")
    with pytest.raises(PolicyLoadError) as raised:
        Engine.load(config_path=str(config))
    assert any("estimated cost" in problem and "rule " in problem for problem in raised.value.problems)
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ncelLimits: {maxObjectBytes: 1048576}\n")
    assert Engine.load(config_path=str(config)).config.cel_limits.max_object_bytes == 1048576
