"""What the engine binds is what the rules read: field_usage and the projections built from it."""

from webhook.celenv import field_usage, inline_params
from webhook.engine import project


def test_top_level_fields_and_whole_objects():
    usage = field_usage('has(container.resources) && container.image.startsWith("x") && pod.volumes.size() > 0')
    assert usage == {"container": frozenset({"resources", "image"}), "pod": frozenset({"volumes"})}
    assert field_usage("quotaSelects(q, pod, container)") == {"pod": None, "container": None}
    assert field_usage("pod.exists(k, k == 'x')") == {"pod": None}


def test_object_is_read_one_level_deeper():
    usage = field_usage("has(object.spec.entrypoint) && object.metadata.name != '' && has(object.spec)")
    assert usage == {"object": frozenset({"spec.entrypoint", "metadata.name", "spec"})}


def test_templates_keys_through_comprehensions_and_their_containers():
    usage = field_usage('templates.exists(t, t.spec.schedulerName == "volcano" && '
                        't.containers.exists(c, has(c.args) && c.env.size() > 0)) && templates.all(u, u.podCount > 0)')
    assert usage["templates"] == frozenset({"spec.schedulerName", "containers.args", "containers.env", "podCount"})
    assert field_usage("size(templates) > 1")["templates"] is None
    assert field_usage("templates.exists(t, t.containers.exists(c, has(c)))")["templates"] == {"containers"}


def test_projection_keeps_exactly_what_is_read():
    value = {"name": "w", "spec": {"a": 1, "b": 2}, "containers": [{"args": ["--x"], "image": "i"}, {"env": []}]}
    assert project(value, frozenset({"spec.a", "containers.args", "name"})) == {
        "name": "w", "spec": {"a": 1}, "containers": [{"args": ["--x"]}, {}]}
    assert project(value, frozenset({"spec", "spec.a"}))["spec"] == {"a": 1, "b": 2}
    assert project(value, None) is value


def test_params_are_folded_outside_strings():
    assert inline_params('params.n > 1 && x == "params.n"', {"n": 2}) == '(2) > 1 && x == "params.n"'
