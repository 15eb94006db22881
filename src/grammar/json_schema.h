// JSON texts as grammars (grammar/grammar.h): any JSON value, any object, the values a JSON
// schema allows, and tool calls (a call format around {"name": ..., "arguments": ...}).
//
// The schema subset is the one OpenAI's strict structured outputs use: "type" (object, array,
// string, number, integer, boolean, null, or a list of them), "properties" + "required" +
// "additionalProperties" (false, true, or a schema for a map), "items" + "minItems" /
// "maxItems" (at most 64), "enum", "const", "anyOf", "nullable", and "$ref" to "#/$defs/..." or
// "#/definitions/..." (recursion allowed). Annotations (title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly, strict) are ignored. Any other
// keyword (pattern, format, minimum, minLength, oneOf, allOf, not, if, ...) is an error naming
// it and its path, so a constraint is never silently dropped.
//
// The text the grammars admit: properties in the schema's order (required ones always, optional
// ones may be left out), at most one space after '{', '[', ',' and ':' and before '}' and ']'
// (no unbounded whitespace a model could loop on), strings of well-formed UTF-8 with JSON's
// escapes (no \u escape of a UTF-16 surrogate), numbers in JSON's syntax with at most 16 digits
// before the point, 16 after it and 2 in the exponent (a value always ends: a model repeating a
// digit cannot run on). Every text the grammar admits parses as JSON and validates against the
// schema.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"

namespace hypic::grammar {

// Deepest schema nesting, most values of one enum, and largest grammar (rules) a schema may
// make: a request's schema is untrusted input, and the matcher's work per byte grows with the
// alternatives open at once.
inline constexpr int kMaxSchemaDepth = 64;
inline constexpr size_t kMaxEnumValues = 1024;
inline constexpr size_t kMaxSchemaRules = 200000;

// The grammar of any JSON object ("response_format": {"type": "json_object"}).
std::shared_ptr<const Grammar> json_object_grammar();

// The grammar of the JSON texts `schema` allows; kInvalidArgument (naming the keyword and
// its path) outside the subset.
Result<std::shared_ptr<const Grammar>> json_schema_grammar(const nlohmann::ordered_json& schema);

// Only checks that `schema` is inside the subset (the same errors, no grammar kept).
Status check_json_schema(const nlohmann::ordered_json& schema);

// How a model writes a tool call: open + body + close, calls of one reply joined by
// separator (Qwen: "<tool_call>\n", "\n</tool_call>", "\n"). The body is
//   json: {"name": "...", "arguments": {...}}
//   xml (Qwen3.5): "<function=NAME>\n" ("<parameter=KEY>\n" VALUE "\n</parameter>\n")*
//        "</function>", the declared properties in order (required ones always); a string
//        VALUE is raw text without '<' (so that it cannot end its element early), a number or
//        an integer in JSON's syntax, a boolean True / False / true / false, an enum one of its
//        values (strings raw), anything else JSON of its schema. A tool without declared
//        properties takes any parameters with raw-text values.
struct ToolCallFormat {
  std::string open, close, separator;
  bool xml = false;
};

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a schema of the subset; null: any object
};

// One call (or, with `parallel`, one or more) of one of `tools`.
Result<std::shared_ptr<const Grammar>> tool_call_grammar(const ToolCallFormat& format,
                                                         const std::vector<ToolSpec>& tools, bool parallel);

}  // namespace hypic::grammar
