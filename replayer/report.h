// Renderings of a replay report: text for people (every recorded string in it escaped by
// base/escape.h, so a token or a path cannot act on the terminal), JSON for scripts (raw
// values, escaped by the JSON writer). The HTML page of `trace replay --html` is trace
// ui's view of the run and this JSON (ui/snapshot.h).
//
// Ownership: pure functions returning new strings/values. Thread safety: reentrant.
// Errors: none; every RunReport renders.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "replayer/replayer.h"

namespace trace::replayer {

std::string RenderReplayText(const RunReport& report);
nlohmann::json ReplayJson(const RunReport& report);

// Shared helpers for the renderings of replay and diff. (Text for a terminal goes through
// base/escape.h: QuoteForDisplay for a token's or a value's text, EscapeForDisplay for the
// rest; `trace verify --html` escapes those once more with HtmlEscape.)
std::string HtmlEscape(const std::string& text);
// A float printed with enough digits to tell two nearby values apart (%.9g).
std::string FormatFloat(double v);

}  // namespace trace::replayer
