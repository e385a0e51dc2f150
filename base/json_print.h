// JSON text for output: the one way a JSON document the user or a tool reads is written
// (every `--json` of the CLI, the export summary, the trace-run export's own parts).
//
// nlohmann's dump() throws type_error.316 on a string that is not valid UTF-8, which a
// command's --json turned into an abort (exit 134) whenever a store held such bytes (a
// flipped byte, a label written by another tool). JsonText never throws: every string,
// object keys included, that is not well-formed UTF-8 (base/utf8.h, RFC 3629) is written
// as SanitizeUtf8 makes it, each maximal invalid subpart replaced by U+FFFD; valid text is
// written exactly as dump() writes it, byte for byte.
//
// Ownership: returns a new string; the value is not modified. Thread safety: reentrant.
// Errors: none; invalid text is replaced, never reported.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace trace {

// value.dump(indent) (indent -1: one line), with invalid UTF-8 replaced by U+FFFD.
std::string JsonText(const nlohmann::json& value, int indent = -1);
std::string JsonText(const nlohmann::ordered_json& value, int indent = -1);

// Writes JsonText(value, indent) and a newline to `out`: a command's --json document.
void PrintJson(std::ostream& out, const nlohmann::json& value, int indent = 2);
void PrintJson(std::ostream& out, const nlohmann::ordered_json& value, int indent = 2);

}  // namespace trace
