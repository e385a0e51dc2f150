// JSON Schema -> grammar: the output formats of structured outputs (response_format
// json_schema / json_object, tool-call arguments), written on one line with Python's
// json.dumps separators (", " and ": "), object properties in schema order.
//
// Supported: type (one or a list), properties (in the order given), required (optional
// properties may be left out), additionalProperties (false, true or a schema; absent means
// false: only the declared properties are written), items, minItems, maxItems, enum,
// const, anyOf and oneOf (as alternatives), allOf with one member, $ref to "#", "#/$defs/..",
// "#/definitions/.." or any JSON pointer in the document (recursion included), $defs and
// definitions, minimum / maximum / exclusiveMinimum / exclusiveMaximum for integers (and
// for numbers when the bounds are whole numbers), minLength / maxLength (characters;
// escapes count as one), strings with escapes and any Unicode, numbers. Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly)
// are ignored, as are unknown keywords.
//
// Known validation keywords that are not supported (pattern, format, multipleOf,
// minProperties, patternProperties, not, if/then/else, prefixItems, uniqueItems: true, ...)
// are an InvalidArgument naming the keyword and where it is when `strict`, and are not
// enforced otherwise (the output may then violate them).
//
// Ownership: adds rules to the caller's GrammarBuilder. Thread safety: none (one builder).
// Errors: InvalidArgument "WHERE: ..." (WHERE e.g. "schema.properties.age"). A schema under
// which no finite value is valid ({"$ref": "#"}, items that must contain themselves) is
// refused when the builder's Build runs (GrammarBuilder::RequireFinite); alternatives of a
// schema that cannot finish are dropped there (an anyOf branch that only recurses).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "recorder/grammar/grammar.h"

namespace trace::recorder::grammar {

struct SchemaOptions {
  bool strict = false;
  std::string where = "schema";  // how errors name the schema's root
};

// A rule matching one JSON value valid under `schema` (the document root, for $ref).
Result<int32_t> AddJsonSchema(GrammarBuilder* builder, const nlohmann::ordered_json& schema,
                              const SchemaOptions& options);
// A rule matching any JSON object (OpenAI's JSON mode), in the same formatting.
int32_t AddAnyJsonObject(GrammarBuilder* builder);

// One JSON value valid under `schema`, as a whole grammar.
Result<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                                         const SchemaOptions& options);

}  // namespace trace::recorder::grammar
