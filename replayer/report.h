// Renderings of a replay report: text for people, JSON for scripts, and one self-contained
// HTML page (no external assets) with every verified token coloured by its margin to the
// runner-up and the first divergence marked (element id "divergence").
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
std::string RenderReplayHtml(const RunReport& report);

// Shared helpers for the renderings of replay and diff.
std::string HtmlEscape(const std::string& text);
// A token's text for a terminal: quoted, control characters and newlines escaped.
std::string QuoteToken(const std::string& text);
// The first `n` bytes of `s`, then "..." when it was longer.
std::string Clip(const std::string& s, size_t n = 60);
// A float printed with enough digits to tell two nearby values apart (%.9g).
std::string FormatFloat(double v);

}  // namespace trace::replayer
