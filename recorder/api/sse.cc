#include "recorder/api/sse.h"

namespace trace::recorder {

std::string SseFrame(std::string_view name, std::string_view data) {
  std::string out;
  out.reserve(name.size() + data.size() + 16);
  if (!name.empty()) {
    out += "event: ";
    out += name;
    out += '\n';
  }
  out += "data: ";
  out += data;
  out += "\n\n";
  return out;
}

std::vector<SseEvent> ParseSse(std::string_view stream) {
  std::vector<SseEvent> events;
  SseEvent current;
  bool has_data = false;
  size_t pos = 0;
  while (pos < stream.size()) {
    size_t nl = stream.find('\n', pos);
    if (nl == std::string_view::npos) break;  // a partial last line is not an event yet
    std::string_view line = stream.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (has_data) events.push_back(std::move(current));
      current = SseEvent();
      has_data = false;
      continue;
    }
    if (line.front() == ':') continue;  // a comment
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "event") {
      current.event = std::string(value);
    } else if (field == "data") {
      if (has_data) current.data += '\n';
      current.data += value;
      has_data = true;
    }
  }
  return events;
}

}  // namespace trace::recorder
