"""The value classes written out by hand (model/valueclass.py) keep what their dataclass decorators gave them.

Each was a dataclass: frozen ones refused assignment, `==` and hashing compared the same fields, `replace` built a
copy through `__init__`, and `astuple` spelt the fields in order (the CEL record's keys are built from it)."""

import pytest

from webhook.cel.cost import Limits
from webhook.cel.library import FUNCTIONS
from webhook.engine.planning import Plan
from webhook.k8s.kindtable import kind_table
from webhook.k8s.versions import FEATURES, SUPPORTED
from webhook.k8s.workload import Classification
from webhook.language.config import Config, PolicyException, PolicySettings
from webhook.language.policy import Rule
from webhook.model.resource import InputError
from webhook.model.valueclass import astuple, field_names, replace
from webhook.outputs.reports.location import Location


def _frozen_values():
    kind = next(iter(kind_table().values()))
    template = kind.templates[0]
    return [Limits(), next(iter(FUNCTIONS.values())), Plan((), False), kind, template, template.spec_rel,
            SUPPORTED[0], next(iter(FEATURES.values())), Classification(), PolicyException("e", ("*",), "why"),
            PolicySettings(), InputError("f.yaml", 3, "bad"), Location("f.yaml", 1, 2, "Pod ml/p", "spec")]


@pytest.mark.parametrize("value", _frozen_values(), ids=lambda value: type(value).__name__)
def test_a_frozen_value_refuses_assignment_and_deletion_of_its_fields_and_of_new_names(value):
    name = field_names(type(value))[0]
    before = getattr(value, name)
    with pytest.raises(AttributeError, match=f"cannot assign to field '{name}'"):
        setattr(value, name, "changed")
    with pytest.raises(AttributeError, match=f"cannot delete field '{name}'"):
        delattr(value, name)
    with pytest.raises(AttributeError, match="cannot assign to field 'extra'"):
        value.extra = 1
    assert getattr(value, name) is before


def test_fields_are_the_init_parameters_in_the_order_the_dataclass_declared_them():
    assert field_names(Limits) == ("max_object_bytes", "per_expression", "min_item_bytes", "max_value_factor")
    assert astuple(Limits()) == (3 * 1024 * 1024, 1e13, 16, 64.0)
    assert astuple(Limits(per_expression=5.0)) == (3 * 1024 * 1024, 5.0, 16, 64.0)
    assert field_names(InputError) == ("file", "line", "message", "column")


def test_equal_values_are_equal_and_hash_alike_and_a_differing_field_is_not_equal():
    assert Classification() == Classification() and hash(Classification()) == hash(Classification())
    assert Classification(tier_label="x") != Classification()
    assert len({Limits(), Limits(), Limits(min_item_bytes=8)}) == 2
    assert InputError("f", 1, "m") == InputError("f", 1, "m") != InputError("f", 1, "m", 2)
    assert Location("f", 1, 2, "r", "x") == Location("f", 1, 2, "r", "x") != Location("f", 1, 2, "r", "x", "ctx")
    assert SUPPORTED[0] == replace(SUPPORTED[0]) and SUPPORTED[0] != SUPPORTED[-1]
    assert Classification() != object() and (Classification() == "x") is False


def test_what_compare_false_left_out_is_still_left_out_of_equality():
    # Plan: `chosen`, `held` and `steps` were field(compare=False); Config: `_excluded`.
    plain = Plan(("r",), True, ("c",), (1,))
    assert plain == Plan(("r",), True, ("c",), (1,), chosen={"k": 1}, held=len, steps=("s",))
    assert hash(plain) == hash(Plan(("r",), True, ("c",), (1,), held=len))
    assert plain != Plan(("r",), True, ("c",), (1,), binds=False)
    config = Config()
    assert config == Config(_excluded={"ns": True}) and config != Config(source="other")


def test_a_mutable_value_compared_by_value_has_no_hash():
    with pytest.raises(TypeError, match="unhashable"):
        hash(Config())


def test_a_factory_default_is_a_fresh_object_per_instance():
    first, second = Config(), Config()
    assert first.policies == {} and first.policies is not second.policies
    assert first.classification == Classification() and first.cel_limits == Limits()


def test_replace_builds_through_init_and_leaves_the_original_alone():
    rule = Rule("r", message=None, when=None)
    assert rule.early is False
    copy = replace(rule, presence=(("container", ("a",)),), needs_pod=True)
    assert (copy.presence, copy.needs_pod, copy.name) == ((("container", ("a",)),), True, "r")
    assert (rule.presence, rule.needs_pod) == ((), False)
    widened = replace(Classification(), accelerators=("x.com/*",))
    assert widened.accelerators == ("x.com/*",) and Classification().accelerators != ("x.com/*",)
    assert widened.is_accelerator("x.com/a") and not Classification().is_accelerator("x.com/a")
    with pytest.raises(TypeError, match="Classification has no field 'acelerators'"):
        replace(Classification(), acelerators=())
