-- validator: idemjob.validate(output_schema, value), the JSON Schema subset
-- of output contracts (draft 2020-12): every keyword valid and invalid, the
-- violation's path, keyword and message, unsupported keywords and bad
-- schemas refused with 22023, NULLs with 22004, deep nesting.

\set VERBOSITY terse

-- an error as "SQLSTATE: message", so both show in one row
CREATE FUNCTION pg_temp.try(s jsonb, v jsonb DEFAULT 'null') RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN coalesce(idemjob.validate(s, v)::text, 'valid');
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

--
-- boolean schemas and the empty schema
--
SELECT s, v, pg_temp.try(s, v)
  FROM (VALUES ('true'::jsonb, '1'::jsonb), ('false', '1'), ('false', 'null'),
               ('{}', '{"a": [1, {"b": null}]}')) t(s, v);

--
-- type (integer: a number with no fractional part, 1.0 included)
--
SELECT v, pg_temp.try('{"type": "integer"}', v)
  FROM (VALUES ('1'::jsonb), ('1.0'), ('-0'), ('1.5'), ('1e2'),
               ('123456789012345678901234567890'), ('"1"'), ('null')) t(v);
SELECT s, v, pg_temp.try(s, v)
  FROM (VALUES ('{"type": "number"}'::jsonb, '1.5'::jsonb), ('{"type": "number"}', '"1"'),
               ('{"type": "string"}', '""'), ('{"type": "string"}', '1'),
               ('{"type": "boolean"}', 'false'), ('{"type": "boolean"}', '0'),
               ('{"type": "null"}', 'null'), ('{"type": "null"}', 'false'),
               ('{"type": "object"}', '{}'), ('{"type": "object"}', '[]'),
               ('{"type": "array"}', '[]'), ('{"type": "array"}', '{}'),
               ('{"type": ["string", "null"]}', 'null'),
               ('{"type": ["string", "null"]}', '2'),
               ('{"type": ["integer", "boolean"]}', '2.5')) t(s, v);

--
-- enum and const: JSON equality (1 = 1.0, key order irrelevant, 0 != false)
--
SELECT v, pg_temp.try('{"enum": [1, "a", {"k": [1, 2]}, null]}', v)
  FROM (VALUES ('1.0'::jsonb), ('"a"'), ('{"k": [1.0, 2.00]}'), ('null'),
               ('true'), ('"b"'), ('{"k": [2, 1]}'), ('[1]')) t(v);
SELECT pg_temp.try('{"enum": []}', '1');
SELECT v, pg_temp.try('{"const": {"a": 1, "b": [true, null]}}', v)
  FROM (VALUES ('{"b": [true, null], "a": 1.0}'::jsonb), ('{"a": 1}'),
               ('{"a": 1, "b": [true, null], "c": 0}')) t(v);
SELECT s, v, pg_temp.try(s, v)
  FROM (VALUES ('{"const": 0}'::jsonb, 'false'::jsonb), ('{"const": false}', 'false'),
               ('{"const": null}', 'null'), ('{"const": ""}', 'null'),
               ('{"const": 2}', '2.000')) t(s, v);

--
-- objects: properties, required, additionalProperties, patternProperties,
-- propertyNames, minProperties, maxProperties, dependentRequired,
-- dependentSchemas
--
SELECT v, pg_temp.try('{"type": "object",
                        "properties": {"id": {"type": "integer"},
                                       "tags": {"type": "array", "items": {"type": "string"}}},
                        "required": ["id"],
                        "additionalProperties": false}', v)
  FROM (VALUES ('{"id": 1}'::jsonb), ('{"id": 1, "tags": ["a"]}'),
               ('{}'), ('{"id": "1"}'), ('{"id": 1, "tags": ["a", 2]}'),
               ('{"id": 1, "extra": true}'), ('"not an object"')) t(v);
SELECT v, pg_temp.try('{"patternProperties": {"^x-": {"type": "string"}, "[0-9]": {"minimum": 10}},
                        "additionalProperties": {"type": "boolean"}}', v)
  FROM (VALUES ('{"x-a": "s", "b1": 10, "c": true}'::jsonb), ('{"x-a": 1}'),
               ('{"x-1": "s"}'), ('{"b2": 3}'), ('{"c": "s"}'), ('{"ax-": true}')) t(v);
SELECT v, pg_temp.try('{"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}}', v)
  FROM (VALUES ('{"abc": 1}'::jsonb), ('{"ab1": 1}'), ('{"abcd": 1}'), ('[1]'),
               ('{"a": {"B": 1}}')) t(v);
SELECT pg_temp.try('{"propertyNames": false}', '{}'),
       pg_temp.try('{"propertyNames": false}', '{"a": 1}');
SELECT v, pg_temp.try('{"minProperties": 1, "maxProperties": 2}', v)
  FROM (VALUES ('{}'::jsonb), ('{"a": 1}'), ('{"a": 1, "b": 2, "c": 3}'), ('[]')) t(v);
SELECT v, pg_temp.try('{"dependentRequired": {"card": ["billing", "cvv"], "x": []}}', v)
  FROM (VALUES ('{"card": 1, "billing": 2, "cvv": 3}'::jsonb), ('{"card": 1, "cvv": 3}'),
               ('{"billing": 2}'), ('{"x": 1}')) t(v);
SELECT v, pg_temp.try('{"dependentSchemas": {"card": {"required": ["billing"],
                                                        "properties": {"billing": {"type": "string"}}}}}', v)
  FROM (VALUES ('{"card": 1, "billing": "b"}'::jsonb), ('{"card": 1}'),
               ('{"card": 1, "billing": 2}'), ('{"billing": 2}')) t(v);
-- properties set to false: the property must be absent
SELECT v, pg_temp.try('{"properties": {"secret": false}}', v)
  FROM (VALUES ('{"public": 1}'::jsonb), ('{"secret": null}')) t(v);

--
-- arrays: items, prefixItems, contains, minContains, maxContains, minItems,
-- maxItems, uniqueItems
--
SELECT v, pg_temp.try('{"prefixItems": [{"type": "string"}, {"type": "integer"}],
                        "items": {"type": "boolean"}}', v)
  FROM (VALUES ('["a", 1, true, false]'::jsonb), ('["a"]'), ('[]'), ('[1]'),
               ('["a", 1.5]'), ('["a", 1, true, "x"]'), ('{"0": 1}')) t(v);
SELECT v, pg_temp.try('{"prefixItems": [{}, {}], "items": false}', v)
  FROM (VALUES ('[1, 2]'::jsonb), ('[1, 2, 3]')) t(v);
SELECT v, pg_temp.try('{"contains": {"type": "integer", "minimum": 5}}', v)
  FROM (VALUES ('[1, 7]'::jsonb), ('[1, 2]'), ('[]'), ('"x"')) t(v);
SELECT v, pg_temp.try('{"contains": {"const": 1}, "minContains": 2, "maxContains": 3}', v)
  FROM (VALUES ('[1, 1]'::jsonb), ('[1, 2]'), ('[1, 1, 1, 1.0]'), ('[]')) t(v);
SELECT v, pg_temp.try('{"contains": {"const": 1}, "minContains": 0}', v)
  FROM (VALUES ('[]'::jsonb), ('[2]')) t(v);
SELECT pg_temp.try('{"minContains": 5, "maxContains": 0}', '[1]') AS ignored_without_contains;
SELECT v, pg_temp.try('{"minItems": 1, "maxItems": 2}', v)
  FROM (VALUES ('[]'::jsonb), ('[1]'), ('[1, 2, 3]'), ('{}')) t(v);
SELECT v, pg_temp.try('{"uniqueItems": true}', v)
  FROM (VALUES ('[1, 2, 3]'::jsonb), ('[1, 2, 1.0]'), ('[0, false, null, "0", [0], {"0": 0}]'),
               ('[{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]'), ('[[1, [2]], [1, [2.0]]]'),
               ('["a", "b", "a", "b"]'), ('[]')) t(v);
SELECT pg_temp.try('{"uniqueItems": false}', '[1, 1]');
-- big arrays: sorted, not compared pairwise
SELECT pg_temp.try('{"uniqueItems": true}', jsonb_agg(i)) FROM generate_series(1, 50000) i;
SELECT pg_temp.try('{"uniqueItems": true}', jsonb_agg(i % 49999)) FROM generate_series(1, 50000) i;
SELECT pg_temp.try('{"uniqueItems": true}', jsonb_agg(jsonb_build_object('k', i, 'v', 'x'))) FROM generate_series(1, 20000) i;

--
-- strings: minLength, maxLength (in characters), pattern (unanchored search)
--
SELECT v, pg_temp.try('{"minLength": 2, "maxLength": 4}', v)
  FROM (VALUES ('"ab"'::jsonb), ('"a"'), ('"abcde"'), ('"héé"'), ('"ééééé"'),
               ('"日本"'), ('"😀😀😀😀"'), ('"😀"'), ('5')) t(v);
SELECT v, pg_temp.try('{"pattern": "b+c"}', v)
  FROM (VALUES ('"abbbcd"'::jsonb), ('"ac"'), ('123')) t(v);
SELECT v, pg_temp.try('{"pattern": "^[a-z]{2,3}-\\d+$"}', v)
  FROM (VALUES ('"ab-12"'::jsonb), ('"abcd-12"'), ('"ab-"'), ('"ab-12\n"')) t(v);
SELECT pg_temp.try('{"pattern": "^é.$"}', '"éü"'), pg_temp.try('{"pattern": "^.$"}', '"😀"');

--
-- numbers: minimum, maximum, exclusiveMinimum, exclusiveMaximum,
-- multipleOf (exact decimal arithmetic)
--
SELECT v, pg_temp.try('{"minimum": 1.5, "maximum": 10}', v)
  FROM (VALUES ('1.5'::jsonb), ('10.0'), ('1.4999999999999999999'), ('10.000000000001'),
               ('"0"')) t(v);
SELECT v, pg_temp.try('{"exclusiveMinimum": 0, "exclusiveMaximum": 1}', v)
  FROM (VALUES ('0.5'::jsonb), ('0'), ('1'), ('-0.000001')) t(v);
SELECT s, v, pg_temp.try(s, v)
  FROM (VALUES ('{"multipleOf": 0.0001}'::jsonb, '0.0075'::jsonb), ('{"multipleOf": 0.0001}', '0.00751'),
               ('{"multipleOf": 1.5}', '4.5'), ('{"multipleOf": 1.5}', '35'),
               ('{"multipleOf": 2}', '10.0'), ('{"multipleOf": 0.01}', '19.99'),
               ('{"multipleOf": 1e-8}', '12391239123'),
               ('{"multipleOf": 3}', '0'), ('{"multipleOf": 3}', '-9'),
               ('{"multipleOf": 7}', '123456789012345678901234567890123456789')) t(s, v);

-- no floating-point overflow: 1e308 is exact, and not a multiple of 0.123456789
SELECT pg_temp.try('{"multipleOf": 0.123456789}', '1e308'), pg_temp.try('{"multipleOf": 0.5}', '1e308');

--
-- allOf, anyOf, oneOf, not, if/then/else
--
SELECT v, pg_temp.try('{"allOf": [{"type": "integer"}, {"minimum": 3}]}', v)
  FROM (VALUES ('4'::jsonb), ('"4"'), ('2')) t(v);
SELECT v, pg_temp.try('{"anyOf": [{"type": "string"}, {"minimum": 3}]}', v)
  FROM (VALUES ('"x"'::jsonb), ('4'), ('2')) t(v);
SELECT v, pg_temp.try('{"oneOf": [{"type": "integer"}, {"minimum": 3}]}', v)
  FROM (VALUES ('2'::jsonb), ('3.5'), ('5'), ('1.5')) t(v);
SELECT v, pg_temp.try('{"not": {"type": "null"}}', v)
  FROM (VALUES ('1'::jsonb), ('null')) t(v);
SELECT v, pg_temp.try('{"if": {"properties": {"kind": {"const": "card"}}, "required": ["kind"]},
                        "then": {"required": ["number"]},
                        "else": {"required": ["iban"]}}', v)
  FROM (VALUES ('{"kind": "card", "number": "4"}'::jsonb), ('{"kind": "card"}'),
               ('{"kind": "sepa", "iban": "x"}'), ('{"kind": "sepa"}')) t(v);
SELECT pg_temp.try('{"then": false, "else": false}', '1') AS no_if_no_effect,
       pg_temp.try('{"if": true, "else": false}', '1') AS if_true,
       pg_temp.try('{"if": false, "then": false}', '1') AS if_false;

--
-- $defs and local $ref (JSON Pointers, ~0 ~1 and percent-decoding)
--
SELECT v, pg_temp.try('{"$defs": {"pos": {"type": "integer", "minimum": 1}},
                        "properties": {"a": {"$ref": "#/$defs/pos"},
                                       "b": {"$ref": "#/properties/a"}}}', v)
  FROM (VALUES ('{"a": 1, "b": 2}'::jsonb), ('{"a": 0}'), ('{"b": "x"}')) t(v);
-- recursion through "#": a tree
SELECT v, pg_temp.try('{"type": "object", "properties": {"value": {"type": "number"},
                        "children": {"type": "array", "items": {"$ref": "#"}}},
                        "additionalProperties": false}', v)
  FROM (VALUES ('{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}'::jsonb),
               ('{"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]}'),
               ('{"children": [{"children": [{"other": 1}]}]}')) t(v);
-- escaped tokens
SELECT pg_temp.try('{"$defs": {"a/b": {"type": "string"}, "t~n": {"type": "integer"},
                                 "p%c": {"type": "null"}, "": {"$defs": {"": {"const": 7}}}},
                      "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/t~0n"},
                                      {"$ref": "#/$defs/p%25c"}, {"$ref": "#/$defs//$defs/"}]}', v)
  FROM (VALUES ('["s", 1, null, 7]'::jsonb), ('[1]'), ('["s", "1"]'), ('["s", 1, 0]'),
               ('["s", 1, null, 8]')) t(v);
-- $ref beside other keywords: both apply
SELECT v, pg_temp.try('{"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}', v)
  FROM (VALUES ('"ab"'::jsonb), ('"abc"'), ('1')) t(v);
-- a $ref into a place that is not a compiled subschema (an annotation)
SELECT pg_temp.try('{"contentSchema": {"type": "integer"}, "$ref": "#/contentSchema"}', '"x"');
-- a $ref to a boolean schema
SELECT pg_temp.try('{"$defs": {"no": false}, "properties": {"a": {"$ref": "#/$defs/no"}}}', '{"a": 1}');
-- mutual recursion that descends into the value is fine
SELECT pg_temp.try('{"$defs": {"a": {"items": {"$ref": "#/$defs/b"}}, "b": {"items": {"$ref": "#/$defs/a"}, "type": "array"}},
                     "$ref": "#/$defs/a"}', '[[[[1]]]]');

--
-- the violation: path (RFC 6901, escaped), keyword, message
--
SELECT pg_temp.try('{"properties": {"a/b": {"properties": {"c~d": {"items": {"type": "string"}}}}}}',
                   '{"a/b": {"c~d": ["x", "y", 3]}}');
SELECT pg_temp.try('{"additionalProperties": false}', '{"x": {"y": 1}}');
SELECT pg_temp.try('{"items": {"additionalProperties": false, "properties": {"ok": true}}}',
                   '[{"ok": 1}, {"ok": 1, "odd/key": 2}]');
SELECT pg_temp.try('{"items": {"required": ["id"]}}', '[{"id": 1}, {}]');
SELECT pg_temp.try('{"required": ["a-very-long-property-name-that-goes-on-and-on-and-on-and-on-and-on-for-ever"]}', '{}');
-- several violations: the same one is reported every time
SELECT pg_temp.try('{"type": "object", "required": ["z"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}',
                   '{"b": 1, "a": 2}') FROM generate_series(1, 3);

--
-- the compiled schema is cached per call site; a different schema recompiles
--
SELECT s, v, pg_temp.try(s, v)
  FROM (VALUES ('{"type": "string"}'::jsonb, '1'::jsonb), ('{"type": "string"}', '"a"'),
               ('{"type": "integer"}', '1'), ('{"minLength": -1}', '1'), ('{"type": "string"}', '1')) t(s, v);
SELECT idemjob.validate(s, v)
  FROM (VALUES ('{"pattern": "^a"}'::jsonb, '"ab"'::jsonb), ('{"pattern": "^b"}', '"ab"'),
               ('{"pattern": "^a"}', '"ba"')) t(s, v);

--
-- annotations: accepted and ignored
--
SELECT pg_temp.try('{"$schema": "https://json-schema.org/draft/2020-12/schema",
                     "$id": "https://example.com/result.json",
                     "title": "t", "description": "d", "default": 1, "examples": [1, "x"],
                     "deprecated": true, "readOnly": false, "writeOnly": false, "$comment": "c",
                     "properties": {"f": {"format": "email", "contentEncoding": "base64",
                                          "contentMediaType": "application/json",
                                          "contentSchema": {"type": "object"},
                                          "$schema": "https://json-schema.org/draft/2020-12/schema"}}}',
                   '{"f": "not an email"}');

--
-- unsupported keywords: refused with 22023, naming the keyword and the place
--
SELECT s, pg_temp.try(s)
  FROM (VALUES ('{"$anchor": "a"}'::jsonb), ('{"$dynamicRef": "#a"}'), ('{"$dynamicAnchor": "a"}'),
               ('{"unevaluatedProperties": false}'), ('{"unevaluatedItems": false}'),
               ('{"definitions": {}}'), ('{"dependencies": {}}'), ('{"additionalItems": false}'),
               ('{"$recursiveRef": "#"}'), ('{"$vocabulary": {}}'), ('{"typo": 1}'),
               ('{"properties": {"a": {"items": {"maxlength": 1}}}}'),
               ('{"allOf": [{}, {"not": {"minimun": 1}}]}'),
               ('{"$defs": {"x": {"nullable": true}}}'),
               ('{"properties": {"a/b": {"x~y": 1}}}')) t(s);
\set VERBOSITY default
SELECT idemjob.validate('{"properties": {"a": {"unevaluatedProperties": false}}}', '{}');
\set VERBOSITY terse

--
-- bad schemas: refused with 22023 and the schema path
--
SELECT s, pg_temp.try(s)
  FROM (VALUES ('1'::jsonb), ('"string"'), ('[]'), ('null'),
               ('{"type": "int"}'), ('{"type": []}'), ('{"type": ["string", "string"]}'), ('{"type": 1}'),
               ('{"type": ["string", 1]}'),
               ('{"enum": 1}'), ('{"required": "a"}'), ('{"required": ["a", "a"]}'), ('{"required": [1]}'),
               ('{"properties": []}'), ('{"properties": {"a": 1}}'), ('{"properties": {"a": [{}]}}'),
               ('{"patternProperties": {"(": {}}}'), ('{"additionalProperties": "no"}'),
               ('{"minLength": -1}'), ('{"maxLength": 1.5}'), ('{"minItems": "1"}'), ('{"maxItems": -1}'),
               ('{"minProperties": null}'), ('{"minContains": -2}'), ('{"maxContains": true}'),
               ('{"multipleOf": 0}'), ('{"multipleOf": -2}'), ('{"multipleOf": "1"}'),
               ('{"minimum": "1"}'), ('{"exclusiveMaximum": true}'),
               ('{"pattern": "("}'), ('{"pattern": "a{2,1}"}'), ('{"pattern": 1}'),
               ('{"items": [{}]}'), ('{"prefixItems": []}'), ('{"prefixItems": {}}'),
               ('{"allOf": []}'), ('{"anyOf": {}}'), ('{"oneOf": [1]}'), ('{"not": []}'),
               ('{"uniqueItems": 1}'), ('{"dependentRequired": {"a": "b"}}'),
               ('{"dependentRequired": {"a": ["b", "b"]}}'), ('{"dependentSchemas": {"a": 1}}'),
               ('{"$defs": []}'), ('{"$defs": {"a": {"type": "x"}}}'),
               ('{"title": 1}'), ('{"deprecated": "yes"}'), ('{"examples": 1}'), ('{"contentSchema": 1}'),
               ('{"$id": 1}')) t(s);
-- minimum and maximum are numbers, whatever their size
SELECT pg_temp.try('{"maxLength": 1e30}', '"abc"') AS huge_limit,
       pg_temp.try('{"minItems": 1.0}', '[]') AS one_point_zero;

--
-- $ref and $id: local JSON Pointers only, $id only at the root
--
SELECT s, pg_temp.try(s)
  FROM (VALUES ('{"$ref": "#/$defs/missing"}'::jsonb), ('{"$defs": {}, "$ref": "#/$defs/a/b"}'),
               ('{"$ref": "other.json"}'), ('{"$ref": "other.json#/a"}'),
               ('{"$ref": "https://json-schema.org/draft/2020-12/schema"}'),
               ('{"$ref": "#foo"}'), ('{"$ref": "#/a~2"}'), ('{"$ref": "#/a~"}'),
               ('{"$ref": "#/%zz"}'), ('{"$ref": "#/%c3"}'), ('{"$ref": 1}'), ('{"$ref": ""}'),
               ('{"minLength": 1, "$ref": "#/minLength"}'), ('{"enum": [1], "$ref": "#/enum"}'),
               ('{"prefixItems": [{}], "$ref": "#/prefixItems/1"}'),
               ('{"prefixItems": [{}], "$ref": "#/prefixItems/01"}'),
               ('{"properties": {"a": {"$id": "a.json"}}}'), ('{"$defs": {"a": {"$id": "#a"}}}'),
               ('{"$id": "https://example.com/s", "type": "integer"}')) t(s);
-- a reference cycle that never moves into the value is refused
SELECT s, pg_temp.try(s)
  FROM (VALUES ('{"$ref": "#"}'::jsonb),
               ('{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}'),
               ('{"anyOf": [{"type": "string"}, {"not": {"$ref": "#"}}]}'),
               ('{"dependentSchemas": {"a": {"$ref": "#"}}}'),
               ('{"$defs": {"a": {"$ref": "#/$defs/a"}}}'),
               ('{"properties": {"a": {"$ref": "#"}}}'),
               ('{"if": {"$ref": "#/then"}, "then": {"$ref": "#/if"}}')) t(s);

--
-- NULL arguments: 22004; over idemjob.max_payload_bytes: 22023
--
SELECT pg_temp.try(NULL, '1'), pg_temp.try('{}', NULL), pg_temp.try(NULL, NULL);
SELECT idemjob.validate('{}', NULL);
SELECT pg_temp.try('{}', jsonb_build_array(repeat('x', 1100000)));
SELECT pg_temp.try(jsonb_build_object('description', repeat('x', 1100000)), '1');
SELECT pg_temp.try('{"type": "string"}', jsonb_build_array(repeat('x', 1000000))) LIKE '%type%' AS under_limit;

--
-- deep nesting: an answer or a clean error (54001), never a crash (with
-- idemjob.max_payload_depth at its highest: by default, since 1.2, values
-- this deep are refused before validation, 22023, limits.sql)
--
SET idemjob.max_payload_depth = 100000;
CREATE FUNCTION pg_temp.deep(s jsonb, v jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text := pg_temp.try(s, v);
BEGIN
	RETURN CASE WHEN r = 'valid' OR r LIKE '{%' OR r LIKE '54001:%' THEN 'answer or clean error'
		   ELSE r END;
END
$$;
-- a 10,000-level value against a schema that recurses as deep
SELECT pg_temp.deep('{"type": "array", "items": {"$ref": "#"}}',
                    (repeat('[', 10000) || repeat(']', 10000))::jsonb);
SELECT pg_temp.deep('{"additionalProperties": {"$ref": "#"}, "type": "object"}',
                    (repeat('{"a":', 10000) || '1' || repeat('}', 10000))::jsonb);
SELECT pg_temp.deep('{"uniqueItems": true, "items": {"$ref": "#"}}',
                    (repeat('[', 10000) || repeat(']', 10000))::jsonb);
-- ... and against schemas that do not look inside: an answer at once
SELECT pg_temp.try('{"type": "array", "uniqueItems": true, "contains": {"type": "array"}}',
                   ('[' || repeat('[', 10000) || repeat(']', 10000) || ', 1]')::jsonb);
SELECT pg_temp.try('{"enum": [1, 2]}', (repeat('[', 10000) || repeat(']', 10000))::jsonb);
-- a 10,000-level schema
SELECT pg_temp.deep((repeat('{"items":', 10000) || '{"type": "string"}' || repeat('}', 10000))::jsonb, '[[[1]]]');
SELECT pg_temp.deep((repeat('{"not":', 10000) || '{}' || repeat('}', 10000))::jsonb, '1');
SELECT pg_temp.deep((repeat('{"allOf": [', 5000) || '{"type": "string"}' || repeat(']}', 5000))::jsonb, '1');
-- moderately deep ones give an answer, with the full path
SELECT length(idemjob.validate('{"type": "array", "items": {"$ref": "#"}}',
                               (repeat('[', 1000) || '1' || repeat(']', 1000))::jsonb)->>'path') AS path_length;
RESET idemjob.max_payload_depth;

--
-- uniqueItems names the first item that repeats an earlier one, and the
-- earlier one; equality is JSON equality at any depth (1 = 1.0 = 1e0)
--
SELECT v, pg_temp.try('{"uniqueItems": true}', v)
  FROM (VALUES ('["b", "a", "b", "a"]'::jsonb), ('[0, -0]'), ('[100, 1e2]'),
               ('[1, "1", true, [1], {"a": 1}, null, false, 1.0]'),
               ('[{"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}]'),
               ('[[1, 2], [2, 1], {"1": 2}, {"2": 1}]'), ('[{"a": 1}, {"a": 1, "b": 2}]')) t(v);

--
-- pattern: simple patterns (anchors, literals, classes, \d \w \s, ".",
-- quantifiers) are matched without the regex engine; the answer is the
-- engine's, under the C collation (\w, \d, \s are ASCII only)
--
SELECT p, s, pg_temp.try(jsonb_build_object('pattern', p), to_jsonb(s)) = 'valid' AS valid,
       s COLLATE "C" ~ p AS engine
  FROM (VALUES ('^SKU-[0-9]+$', 'SKU-00012'), ('^SKU-[0-9]+$', 'SKU-'), ('^SKU-[0-9]+$', 'xSKU-1'),
               ('^[a-z0-9-]+$', 'pay-2026'), ('^[a-z0-9-]+$', 'Pay'), ('^[a-z0-9-]+$', ''),
               ('abc', 'xxabcxx'), ('abc$', 'abcx'), ('', 'anything'), ('^$', ''), ('^$', ' '),
               ('^.$', 'é'), ('^.{2}$', 'é日'), ('^.{2}$', 'é'), ('^\w$', 'é'), ('^\d$', '٤'),
               ('^\d{4}-\d{2}-\d{2}$', '2026-12-03'), ('^\d{4}-\d{2}-\d{2}$', '2026-1-03'),
               ('^\w+@\w+\.com$', 'a_b@c.com'), ('^\w+@\w+\.com$', 'a@c.org'),
               ('^[\w.-]*$', 'a.b-c'), ('^[\w.-]*$', 'a b'), (E'^\\s*$', E' \t '),
               ('^a?b*c+$', 'c'), ('^a?b*c+$', 'abbc'), ('^a?b*c+$', 'aab'),
               ('x{2,3}', 'axxb'), ('^x{2,3}$', 'xxxx'), ('^x{2,}$', 'xxxxx'), ('^\$\.\*$', '$.*'),
               ('^[^a]$', 'é'), ('^(ab)+$', 'abab'), ('^a|b$', 'xb')) t(p, s);
