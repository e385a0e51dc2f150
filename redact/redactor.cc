#include "redact/redactor.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "proto/llm_call_tokens.h"

namespace trace::redact {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

struct Range {
  size_t begin;
  size_t end;
  size_t rule;  // index into the rule names (literals first, then patterns)
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A redaction marker is kMarkerOpen + rule name + "]".
constexpr std::string_view kMarkerOpen = "[REDACTED:";

std::string Marker(const std::string& rule) {
  return std::string(kMarkerOpen) + rule + "]";
}

// The markers of `markers` (this redactor's own, see Redactor::markers_) already in `text`,
// as [begin, end) spans in increasing order. Only a whole marker of a rule in force counts:
// "[REDACTED:" followed by anything up to a ']' would let text that merely looks like a
// marker hide a secret inside it ("[REDACTED:x sk-... ]", redact_fuzz).
std::vector<std::pair<size_t, size_t>> MarkerSpans(std::string_view text,
                                                   const std::vector<std::string>& markers) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t at = text.find(kMarkerOpen); at != std::string_view::npos;
       at = text.find(kMarkerOpen, at + 1)) {
    size_t longest = 0;
    for (const std::string& m : markers) {
      if (m.size() > longest && text.substr(at, m.size()) == m) longest = m.size();
    }
    if (longest > 0) spans.emplace_back(at, at + longest);
  }
  return spans;
}

// Whether [begin, end) lies inside one of `spans` (sorted, disjoint).
bool InsideSpan(const std::vector<std::pair<size_t, size_t>>& spans, size_t begin, size_t end) {
  auto it =
      std::upper_bound(spans.begin(), spans.end(), begin,
                       [](size_t b, const std::pair<size_t, size_t>& s) { return b < s.first; });
  if (it == spans.begin()) return false;
  --it;
  return begin >= it->first && end <= it->second;
}

constexpr uint8_t kJsonStringByte = 1;
constexpr uint8_t kJsonCutPoint = 2;

// Whether `text` is one JSON document. accept() builds no document and nlohmann's parser
// is iterative, so a text nested 100,000 levels deep is checked without recursion.
bool IsJsonText(const std::string& text) {
  // nlohmann's lexer reads a NUL byte as the end of the input, so "{}\0 sk-..." would pass
  // as {} and the text after the NUL would be neither walked nor, as JSON layout, scanned.
  // A NUL is never part of a JSON text (inside strings it must be escaped).
  if (text.find('\0') != std::string::npos) return false;
  return nlohmann::json::accept(text);
}

// `value` written as the content of a JSON string (escaped, without the quotes).
std::string JsonStringContent(const std::string& value) {
  const std::string quoted =
      nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// Applies `fn` to the decoded content of every string of a valid JSON text, keys included,
// in the order written, and writes each one that `fn` changed back in place, escaped.
// Working on the text rather than on a parsed document keeps every byte that did not
// change, needs no recursion however deep the nesting, and sees each member of an object
// that repeats a key (a parsed document keeps only the last, so a secret in an earlier
// one was never scanned: redact_fuzz). Returns true when anything changed.
template <typename Fn>
bool RedactJsonStrings(std::string* text, const Fn& fn) {
  const std::string& in = *text;
  std::string out;
  size_t copied = 0;
  bool changed = false;
  for (size_t open = in.find('"'); open != std::string::npos; open = in.find('"', open + 1)) {
    // Outside strings a valid JSON text holds no quote, so `open` starts a string; find its
    // closing quote (in bounds: the text is valid).
    size_t close = open + 1;
    bool escaped = false;
    while (in[close] != '"') {
      if (in[close] == '\\') {
        escaped = true;
        ++close;
      }
      ++close;
    }
    std::string value;
    if (escaped) {
      const std::string_view token = std::string_view(in).substr(open, close - open + 1);
      const auto decoded = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
      if (!decoded.is_string()) return false;  // not valid JSON after all: the text pass has it
      value = decoded.get<std::string>();
    } else {
      value = in.substr(open + 1, close - open - 1);
    }
    if (fn(&value)) {
      out.append(in, copied, open + 1 - copied);
      out += JsonStringContent(value);
      copied = close;
      changed = true;
    }
    open = close;
  }
  if (!changed) return false;
  out.append(in, copied, std::string::npos);
  *text = std::move(out);
  return true;
}

// For each byte of a valid JSON text (and one past the end): whether it lies inside a
// string value, between the quotes, and whether a replacement may start or end there
// (inside a string, not within an escape sequence or a multi-byte character). Object keys
// count as structure: a match running across them leaves them alone (replacing two keys
// by the same marker would merge their members); a secret inside one key is found when
// each string, keys included, is redacted decoded (RedactJsonStrings).
std::vector<uint8_t> JsonLayout(std::string_view text) {
  std::vector<uint8_t> layout(text.size() + 1, 0);
  bool in_string = false;
  size_t string_begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!in_string) {
      if (c == '"') {
        in_string = true;
        string_begin = i + 1;
        layout[i + 1] |= kJsonCutPoint;  // right after the opening quote
      }
      continue;
    }
    if (c == '"') {
      in_string = false;  // the closing quote: its position was marked a cut point
      const size_t next = text.find_first_not_of(" \t\r\n", i + 1);
      if (next != std::string_view::npos && text[next] == ':') {  // a key
        std::fill(layout.begin() + string_begin, layout.begin() + i, 0);
      }
      continue;
    }
    const size_t len = c != '\\' ? 1 : text[i + 1] == 'u' ? 6 : 2;  // valid JSON: in bounds
    for (size_t k = i; k < i + len; ++k) layout[k] |= kJsonStringByte;
    const bool continuation =
        i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80;
    if (!continuation) layout[i + len] |= kJsonCutPoint;
    i += len - 1;
  }
  return layout;
}

std::string MapKeyText(const Message& entry) {
  const FieldDescriptor* key = entry.GetDescriptor()->FindFieldByNumber(1);
  const Reflection* refl = entry.GetReflection();
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return refl->GetString(entry, key);
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(refl->GetInt32(entry, key));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(refl->GetInt64(entry, key));
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(refl->GetUInt32(entry, key));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(refl->GetUInt64(entry, key));
    case FieldDescriptor::CPPTYPE_BOOL:
      return refl->GetBool(entry, key) ? "true" : "false";
    default:
      return "?";
  }
}

}  // namespace

const char kRedactedImportNote[] =
    "This export is redacted: secrets were replaced by [REDACTED:<rule>] in the fields listed. "
    "A run imported from it can be checked at the tokens level at most: its text no longer "
    "matches what the model saw, and the calls listed lost their prompt or sampled token ids "
    "with the text, so those calls cannot be replayed.";

int64_t RedactionReport::replacements() const {
  int64_t n = 0;
  for (const auto& f : fields) {
    for (const auto& [rule, count] : f.rules) n += count;
  }
  return n;
}

std::map<std::string, int> RedactionReport::RuleTotals() const {
  std::map<std::string, int> out;
  for (const auto& f : fields) {
    for (const auto& [rule, count] : f.rules) out[rule] += count;
  }
  return out;
}

Result<Redactor> Redactor::Create(const RuleSet& rules) {
  Redactor r;
  for (const PatternRule& p : rules.patterns()) {
    auto compiled = CompiledPattern::Compile(p.pattern);
    if (!compiled.ok()) {
      return InvalidArgument("redaction rule '" + p.name + "': " + compiled.status().message());
    }
    r.patterns_.push_back({p.name, std::move(*compiled)});
  }
  r.literals_ = rules.literals();
  for (const std::string& name : r.RuleNames()) {
    const std::string marker = Marker(name);
    const std::string in_json = JsonStringContent(marker);
    r.longest_marker_ = std::max({r.longest_marker_, marker.size(), in_json.size()});
    r.markers_.push_back(marker);
    if (in_json != marker) r.markers_.push_back(in_json);
  }
  return r;
}

size_t Redactor::GrowthLimit(size_t size) const {
  return (size + 1) * std::max<size_t>(longest_marker_, 1);
}

namespace {

// A text replaced whole counts once, under the rule that replaced the most in it (then the
// first by name), or `fallback` when none did: rewrites *hits so and returns that rule.
std::string CountOnce(std::map<std::string, int>* hits, const std::string& fallback) {
  const std::string* best = &fallback;
  int most = 0;
  for (const auto& [rule, count] : *hits) {
    if (count > most) {
      most = count;
      best = &rule;
    }
  }
  std::string rule = *best;
  *hits = {{rule, 1}};
  return rule;
}

void AddHits(const std::map<std::string, int>& from, std::map<std::string, int>* to) {
  if (to == nullptr) return;
  for (const auto& [rule, count] : from) (*to)[rule] += count;
}

}  // namespace

std::vector<std::string> Redactor::RuleNames() const {
  std::vector<std::string> names;
  for (const auto& p : patterns_) names.push_back(p.name);
  for (const auto& l : literals_) names.push_back(l.name);
  return names;
}

// A marker can complete a rule's context ("[REDACTED:aws-secret-access-key]" holds "aws" and
// "secret", so 40 characters after it look like a key), and a replaced secret can make a
// document JSON: redaction repeats until nothing changes, so redacting its output again
// changes nothing. Each pass only replaces text with markers, and with real rules a few
// passes settle; rules whose matches break the markers of the pass before can grow the text
// at every pass, which GrowthLimit stops (the text is then replaced whole). A text still
// changing after kMaxRedactionPasses (a chain of contexts, each marker completing the next
// match: redact_fuzz built one of AWS keys) is replaced whole too, so that a second
// redaction never finds more.
constexpr int kMaxRedactionPasses = 8;

bool Redactor::RedactText(std::string* text, std::map<std::string, int>* hits) const {
  const size_t max_size = GrowthLimit(text->size());
  std::map<std::string, int> counted;  // this text's alone: a text replaced whole counts once
  bool changed = false;
  for (int pass = 1; Redact(text, &counted, nullptr, max_size); ++pass) {
    changed = true;
    if (pass < kMaxRedactionPasses) continue;
    std::string probe = *text;
    if (Redact(&probe, nullptr, nullptr, max_size)) {  // it would not have settled
      *text = Marker(CountOnce(&counted, RuleNames().front()));
    }
    break;
  }
  AddHits(counted, hits);
  return changed;
}

bool Redactor::Redact(std::string* text, std::map<std::string, int>* caller_hits,
                      const std::vector<uint8_t>* json_layout, size_t max_size) const {
  if (text->empty()) return false;
  // This pass's counts reach the caller only if the pass completes. A text replaced whole
  // counts once: `caller_hits` holds this text's counts alone (RedactText's and
  // RedactJsonText's own maps) and becomes that one count.
  std::map<std::string, int> pass_hits;
  std::map<std::string, int>* hits = caller_hits ? &pass_hits : nullptr;
  std::string_view subject(*text);
  std::vector<Range> ranges;
  // Literal secrets first: on equal ranges the environment variable's name is reported.
  for (size_t i = 0; i < literals_.size(); ++i) {
    const std::string& value = literals_[i].value;
    for (size_t at = subject.find(value); at != std::string_view::npos;
         at = subject.find(value, at + value.size())) {
      ranges.push_back({at, at + value.size(), i});
    }
  }
  std::vector<std::pair<size_t, size_t>> found;
  for (size_t i = 0; i < patterns_.size(); ++i) {
    found.clear();
    if (!patterns_[i].compiled.FindAll(subject, &found)) {
      // PCRE2 gave up on this text: the whole field is treated as secret (a JSON document
      // becomes a JSON string, so it stays JSON).
      *text = json_layout ? nlohmann::json(Marker(patterns_[i].name)).dump()
                          : Marker(patterns_[i].name);
      if (caller_hits) *caller_hits = {{patterns_[i].name, 1}};
      return true;
    }
    for (const auto& [b, e] : found) ranges.push_back({b, e, literals_.size() + i});
  }
  // A match inside a marker that an earlier pass wrote is not redacted again: a rule that
  // matches the marker's own characters would replace them pass after pass, the text growing
  // by the marker's length for every byte each pass (export_inputs_fuzz: a one-character
  // class over "_.:a9" hung for minutes). A match that only starts or ends in a marker
  // still counts (a marker can complete a rule's context:
  // RedactRulesTest.AMarkerThatCompletesARuleIsRedactedInTheSamePass).
  if (!ranges.empty()) {
    const auto markers = MarkerSpans(subject, markers_);
    std::erase_if(ranges, [&](const Range& r) { return InsideSpan(markers, r.begin, r.end); });
  }
  if (ranges.empty()) return false;
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return a.rule < b.rule;
  });
  auto rule_name = [&](size_t rule) -> const std::string& {
    return rule < literals_.size() ? literals_[rule].name : patterns_[rule - literals_.size()].name;
  };
  std::string out;
  out.reserve(text->size());
  size_t copied = 0;
  bool changed = false;
  const std::string* runaway = nullptr;  // the rule whose marker passed max_size
  auto replace = [&](size_t begin, size_t end, const std::string& name) {
    if (runaway) return;
    out.append(subject.substr(copied, begin - copied));
    // Inside a JSON string the marker is written as JSON string content (a rule named
    // after an environment variable may hold any character).
    std::string marker = Marker(name);
    if (json_layout) marker = JsonStringContent(marker);
    out += marker;
    copied = end;
    if (out.size() > max_size) {
      runaway = &name;
      return;
    }
    // A match that is already this marker (a URL password rule matches
    // "user:[REDACTED:url-password]@") changes nothing: redacting twice is a no-op.
    if (subject.substr(begin, end - begin) == marker) return;
    if (hits) ++(*hits)[name];
    changed = true;
  };
  for (size_t i = 0; i < ranges.size() && !runaway;) {
    // Overlapping ranges merge into one replacement, named by the first.
    size_t begin = ranges[i].begin, end = ranges[i].end;
    const std::string& name = rule_name(ranges[i].rule);
    size_t j = i + 1;
    while (j < ranges.size() && ranges[j].begin < end) end = std::max(end, ranges[j++].end);
    i = j;
    if (!json_layout) {
      replace(begin, end, name);
      continue;
    }
    // A JSON document: the match is replaced only where it covers string content, piece
    // by piece, each piece widened to whole characters and escapes, so the structure and
    // the quotes stay (a key block can start in one message and end in a later one).
    const std::vector<uint8_t>& layout = *json_layout;
    for (size_t k = std::max(begin, copied); k < end;) {
      if (!(layout[k] & kJsonStringByte)) {
        ++k;
        continue;
      }
      size_t piece_begin = k;
      while (!(layout[piece_begin] & kJsonCutPoint)) --piece_begin;
      while (k < end && (layout[k] & kJsonStringByte)) ++k;
      size_t piece_end = k;
      while (!(layout[piece_end] & kJsonCutPoint)) ++piece_end;
      replace(std::max(piece_begin, copied), piece_end, name);
      k = piece_end;
    }
  }
  if (runaway) {
    // Replaced whole, as when PCRE2 gives up (a JSON document becomes a JSON string).
    *text = json_layout ? nlohmann::json(Marker(*runaway)).dump() : Marker(*runaway);
    if (caller_hits) *caller_hits = {{*runaway, 1}};
    return true;
  }
  out.append(subject.substr(copied));
  *text = std::move(out);
  AddHits(pass_hits, caller_hits);
  return changed;
}

bool Redactor::RedactJsonText(std::string* text, std::map<std::string, int>* hits) const {
  const size_t max_size = GrowthLimit(text->size());
  std::map<std::string, int> counted;
  bool changed = false;
  for (int pass = 1; RedactJsonOnce(text, &counted, max_size); ++pass) {
    changed = true;
    // The strings inside are redacted one by one, each within its own limit; the document
    // as a whole is held to its own here, and to the passes (see kMaxRedactionPasses).
    bool whole = text->size() > max_size;
    if (!whole && pass < kMaxRedactionPasses) continue;
    if (!whole) {
      std::string probe = *text;
      std::map<std::string, int> unused;
      whole = RedactJsonOnce(&probe, &unused, max_size);  // it would not have settled
    }
    if (whole) *text = nlohmann::json(Marker(CountOnce(&counted, RuleNames().front()))).dump();
    break;
  }
  AddHits(counted, hits);
  return changed;
}

bool Redactor::RedactJsonOnce(std::string* text, std::map<std::string, int>* hits,
                              size_t max_size) const {
  if (!IsJsonText(*text)) {  // not JSON: text it is
    const bool changed = RedactText(text, hits);
    // The secret replaced may have been what kept the text from being JSON (a control
    // byte in a token): then the JSON pass follows, so a second redaction finds nothing
    // more (escaped secrets such as "\u0073k-..." are only seen in the decoded strings).
    if (changed && IsJsonText(*text)) RedactJsonOnce(text, hits, max_size);
    return changed;
  }
  const std::vector<uint8_t> layout = JsonLayout(*text);
  const bool changed = Redact(text, hits, &layout, max_size);
  // Redact replaced string content only, so the text is still JSON; each string, key or
  // value, is then redacted decoded (a secret in a key, or escaped, is found there).
  if (changed && !IsJsonText(*text)) return changed;
  const bool deeper = RedactJsonStrings(text, [&](std::string* s) { return RedactText(s, hits); });
  return changed || deeper;
}

std::vector<std::string> Redactor::RedactMessage(Message* message, const std::string& where,
                                                 const std::string& prefix,
                                                 RedactionReport* report) const {
  std::vector<std::string> changed;
  const Reflection* refl = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(*message, &fields);
  auto scan = [&](std::string* value, const std::string& path, bool json) {
    std::map<std::string, int> hits;
    bool did = json ? RedactJsonText(value, &hits) : RedactText(value, &hits);
    if (did) {
      changed.push_back(path);
      if (report) report->fields.push_back({where, path, std::move(hits)});
    }
    return did;
  };
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      const bool json = EndsWith(f->name(), "_json");
      if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*message, f); ++i) {
          std::string v = refl->GetRepeatedString(*message, f, i);
          if (scan(&v, path + "[" + std::to_string(i) + "]", json)) {
            refl->SetRepeatedString(message, f, i, std::move(v));
          }
        }
      } else {
        std::string v = refl->GetString(*message, f);
        if (scan(&v, path, json)) refl->SetString(message, f, std::move(v));
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_map()) {
        // Entries by key: a protobuf map's order differs from process to process, and the
        // report (and so `trace export`) must not.
        std::vector<std::pair<std::string, int>> entries;
        for (int i = 0; i < refl->FieldSize(*message, f); ++i) {
          entries.emplace_back(MapKeyText(refl->GetRepeatedMessage(*message, f, i)), i);
        }
        std::sort(entries.begin(), entries.end());
        for (auto& [key, i] : entries) {
          Message* entry = refl->MutableRepeatedMessage(message, f, i);
          RedactText(&key, nullptr);  // a report never repeats a secret, even from a key
          auto sub = RedactMessage(entry, where, path + "[" + key + "].", report);
          changed.insert(changed.end(), sub.begin(), sub.end());
        }
      } else if (f->is_repeated()) {
        for (int i = 0; i < refl->FieldSize(*message, f); ++i) {
          auto sub = RedactMessage(refl->MutableRepeatedMessage(message, f, i), where,
                                   path + "[" + std::to_string(i) + "].", report);
          changed.insert(changed.end(), sub.begin(), sub.end());
        }
      } else {
        auto sub = RedactMessage(refl->MutableMessage(message, f), where, path + ".", report);
        changed.insert(changed.end(), sub.begin(), sub.end());
      }
    }
  }
  return changed;
}

void Redactor::RedactHeader(proto::RunHeader* header, RedactionReport* report) const {
  // By name: a protobuf map's order differs from process to process; the report's must not.
  std::vector<std::string> names;
  for (const auto& [name, value] : header->env()) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string& value = (*header->mutable_env())[name];
    if (value.empty() || !RuleSet::NameLooksSecret(name)) continue;
    value = Marker("env-name");
    if (report) report->fields.push_back({"header", "env[" + name + "].value", {{"env-name", 1}}});
  }
  RedactMessage(header, "header", "", report);
}

void Redactor::RedactEvent(proto::Event* event, RedactionReport* report) const {
  const std::string where = "seq " + std::to_string(event->seq());
  std::vector<std::string> changed = RedactMessage(event, where, "", report);
  if (!event->has_llm_call() || changed.empty()) return;
  std::set<std::string> paths(changed.begin(), changed.end());
  proto::LlmCall* c = event->mutable_llm_call();
  const bool prompt_redacted =
      paths.count("llm_call.rendered_prompt") ||
      (c->rendered_prompt().empty() && paths.count("llm_call.request_json"));
  if (prompt_redacted && c->prompt_token_ids_size() > 0) {
    c->clear_prompt_token_ids();
    if (report) report->prompt_tokens_removed.push_back(event->seq());
  }
  const bool output_redacted = paths.count("llm_call.output_text") ||
                               (c->output_text().empty() && paths.count("llm_call.response_json"));
  if (output_redacted && c->token_ids_size() > 0) {
    proto::ClearSampledTokenArrays(c);
    c->set_num_layers(0);
    c->set_route_width(0);
    if (report) report->sampled_tokens_removed.push_back(event->seq());
  }
}

void RedactRun(const Redactor& redactor, proto::RunHeader* header,
               std::vector<proto::Event>* events, RedactionReport* report) {
  redactor.RedactHeader(header, report);
  for (proto::Event& e : *events) redactor.RedactEvent(&e, report);
}

}  // namespace trace::redact
