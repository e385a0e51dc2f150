// Server-sent events (text/event-stream), as the three wire formats frame their streams:
// writing one event (`event:` line optional, one `data:` line), and splitting a received
// stream back into its events (what proxy mode folds into a response body).
//
// Ownership: values. Thread safety: reentrant. Errors: none; a malformed line is skipped
// (comments, unknown fields and a trailing partial event are ignored, as clients do).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trace::recorder {

struct SseEvent {
  std::string event;  // the `event:` field; empty when absent
  std::string data;   // the `data:` lines joined with '\n'
};

// "event: NAME\ndata: DATA\n\n" ("data: DATA\n\n" when `name` is empty). `data` must hold no
// newline (JSON as dumped has none).
std::string SseFrame(std::string_view name, std::string_view data);

// The complete events of `stream` in order (an event ends at a blank line; CRLF accepted).
std::vector<SseEvent> ParseSse(std::string_view stream);

}  // namespace trace::recorder
