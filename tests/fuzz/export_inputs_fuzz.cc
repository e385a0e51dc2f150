// Fuzz target: what `trace export` reads from its user besides the store (exporters/,
// redact/): the replay report of --replay-report FILE, the OTLP endpoint URL, the OTLP
// header list of OTEL_EXPORTER_OTLP_HEADERS and --otlp-header, and a --redact-rules file.
// Byte 0 of the input picks the parser; the rest is its text. Promises: no crash or
// exception; an error is one printable line (naming the file or variable when there is
// one); what is accepted is usable: a URL's origin parses back to the same scheme, host and
// port, a header name is an HTTP token and no value holds CR or LF, a rules file's rules
// compile into a redactor.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "exporters/otlp_http.h"
#include "exporters/replay_levels.h"
#include "exporters/url.h"
#include "redact/redactor.h"
#include "redact/rules.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using trace::fuzz::Fail;
using trace::fuzz::RequireOneLine;

void Url(std::string_view text) {
  auto url = trace::exporters::ParseHttpUrl(text);
  if (!url.ok()) return RequireOneLine(url.status(), "ParseHttpUrl");
  auto again = trace::exporters::ParseHttpUrl(url->Origin());
  if (!again.ok()) Fail("the origin of an accepted URL does not parse: " + url->Origin());
  if (again->scheme != url->scheme || again->host != url->host || again->port != url->port) {
    Fail("the origin of an accepted URL parses differently: " + url->Origin());
  }
  auto traces = trace::exporters::OtlpTracesUrl(text);
  if (!traces.ok()) RequireOneLine(traces.status(), "OtlpTracesUrl");
}

void Headers(std::string_view text) {
  auto list = trace::exporters::ParseOtlpHeaderList(text, "OTEL_EXPORTER_OTLP_HEADERS");
  if (!list.ok())
    RequireOneLine(list.status(), "ParseOtlpHeaderList", "OTEL_EXPORTER_OTLP_HEADERS");
  auto one = trace::exporters::ParseOtlpHeader(text);
  if (!one.ok()) RequireOneLine(one.status(), "ParseOtlpHeader");
  trace::exporters::HttpHeaders all;
  if (list.ok()) all = *list;
  if (one.ok()) all.push_back(*one);
  for (const auto& [key, value] : all) {
    const bool token = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) ||
             std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
    if (!token) Fail("accepted a header name that is not an HTTP token: " + key);
    if (value.find_first_of("\r\n") != std::string::npos) Fail("accepted a line break in " + key);
  }
}

void RulesFile(std::string_view text) {
  static const std::string path = "/tmp/trace-export-inputs-fuzz-" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  trace::redact::RuleSet rules = trace::redact::RuleSet::Empty();
  trace::Status st = rules.AddRulesFile(path);
  if (!st.ok()) return RequireOneLine(st, "AddRulesFile", path);
  auto redactor = trace::redact::Redactor::Create(rules);
  if (!redactor.ok())
    Fail("rules that were accepted do not compile: " + redactor.status().message());
  std::string sample(text);
  (void)redactor->RedactText(&sample, nullptr);
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {};
}  // tests/fuzz/corpus/ holds them

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto levels = trace::exporters::ParseReplayReport(
          std::string(text), "01JD0000000000000000000AAA", "fuzz/report.json");
      if (!levels.ok()) RequireOneLine(levels.status(), "ParseReplayReport", "fuzz/report.json");
      break;
    }
    case 1:
      Url(text);
      break;
    case 2:
      Headers(text);
      break;
    default:
      RulesFile(text);
      break;
  }
  return 0;
}
