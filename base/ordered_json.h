// Parsing JSON into nlohmann::ordered_json (object keys in the order they came) in time
// linear in the text.
//
// Why: ordered_json's objects are vectors, and nlohmann's parser adds each key with a
// linear search for it, so an object of n keys takes n^2/2 string comparisons: 40,000 keys
// took 1.3 s, and one 10 MB request body of a million keys (inside the recorder's body
// limit) would hold a server thread for a quarter of an hour. This parser gives the same
// value (a repeated key keeps its first place and takes its last value, as nlohmann's
// parser does) but finds keys through a hash index while an object is open.
//
// One difference, on purpose: nlohmann's lexer takes a NUL byte for the end of the input
// and accepts `{"a": 1}` followed by a NUL and anything at all as `{"a": 1}`; this parser
// refuses any text holding a NUL (never valid JSON), as the APIs the recorder imitates do.
//
// Ownership: returns a value. Thread safety: reentrant. Errors: none thrown; text that is
// not JSON gives a value whose is_discarded() is true, as nlohmann's parse with
// allow_exceptions=false does. It does not limit depth: callers that take text from
// outside check that first (recorder/api/json_body.h).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace trace {

// nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false), in linear time,
// except that text holding a NUL byte is discarded.
nlohmann::ordered_json ParseOrderedJson(std::string_view text);

// Appends the member `key`: `value` to `object` (an object) without looking for `key` in it,
// which `object[key]` and emplace do, one comparison per member. For copying members whose
// keys are known to be distinct (from a nlohmann::json, whose keys are unique) in linear
// time; a key already in `object` would be duplicated.
void AppendDistinctMember(nlohmann::ordered_json& object, std::string key,
                          nlohmann::ordered_json value);

}  // namespace trace
