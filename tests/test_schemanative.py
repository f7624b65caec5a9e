"""The JSON Schema keywords evaluated without jsonschema give jsonschema's answers, messages and paths."""

import itertools

import pytest
from jsonschema import Draft202012Validator

from webhook.language.schemanative import NativeSchemaRule, compile_schema, equal

SCHEMAS = [
    {"properties": {"hostNetwork": {"not": {"const": True}}}},
    {"properties": {"securityContext": {"properties": {"capabilities": {"properties": {
        "add": {"type": "array", "maxItems": 0}}}}}}},
    {"properties": {"spec": {"properties": {"minReplicas": {"not": {"const": 0}}}}}},
    {"properties": {"x": {"const": [1, {"a": True}]}}},
    {"properties": {"x": {"enum": ["a", 1, None]}}},
    {"properties": {"x": {"type": ["integer", "null"]}, "y": {"type": "number"}, "z": {"minItems": 1}}},
    {"properties": {"x": {"type": "boolean", "not": {"const": False}}, "y": {"minItems": 2, "maxItems": 3}}},
    {"properties": {"x": True}},
]
VALUES = [None, True, False, 0, 0.0, 1, 1.0, 1.5, "", "a", "true", [], [1], [1, {"a": True}], [1, {"a": 1}],
          ["a", "b", "c", "d"], {}, {"a": True}]


def instances():
    yield from (None, "text", [], {})
    for value in VALUES:
        for key in ("hostNetwork", "x", "y", "z"):
            yield {key: value}
        yield {"securityContext": {"capabilities": {"add": value}}}
        yield {"securityContext": value}
        yield {"spec": {"minReplicas": value}}
    for one, two in itertools.product(VALUES[:8], VALUES[8:]):
        yield {"x": one, "y": two, "z": two}


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: repr(s)[:60])
def test_the_same_violations_as_jsonschema(schema):
    native = NativeSchemaRule(compile_schema(schema), schema)
    reference = Draft202012Validator(schema)
    for instance in instances():
        expected = [(list(e.absolute_path), e.message) for e in reference.iter_errors(instance)]
        assert list(native.errors(instance)) == expected, instance


def test_other_keywords_and_bad_values_go_to_jsonschema():
    for schema in ({"required": ["a"]}, {"properties": {"a": {"pattern": "x"}}}, {"type": "strnig"},
                   {"maxItems": -1}, {"maxItems": True}, {"enum": "a"}, {"properties": []}, {"not": 1}):
        assert compile_schema(schema) is None, schema


def test_equality_is_json_schemas():
    assert equal(1, 1.0) and not equal(True, 1) and not equal(0, False) and equal([1, {"a": 2}], [1.0, {"a": 2}])
    assert not equal({"a": 1}, {"a": 1, "b": 2}) and not equal([1], 1) and equal(None, None) and not equal("1", 1)
