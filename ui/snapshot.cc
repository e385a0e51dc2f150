#include "ui/snapshot.h"

#include "replayer/report.h"
#include "ui/assets.h"

namespace trace::ui {
namespace {

std::string_view AssetContent(std::string_view path) {
  for (const Asset& a : Assets()) {
    if (a.path == path) return a.content;
  }
  return {};
}

// JSON placed inside a <script> element: every "<" (only ever inside a string) as \u003c,
// so no text from a run can close the element or open a comment.
std::string JsonForScript(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

// The app's own script or stylesheet inline: "</" becomes "<\/" (the same text in a JS
// string or CSS), so an element-closing tag cannot occur; esbuild's output has no "<!--".
std::string RawElementText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

}  // namespace

std::string SnapshotKey(const std::string& path, const std::map<std::string, std::string>& params) {
  std::string key = path;
  char sep = '?';
  for (const auto& [name, value] : params) {  // std::map: name order
    if (value.empty()) continue;
    key += sep + name + "=" + value;
    sep = '&';
  }
  return key;
}

Status Snapshot::Add(const std::string& path, const std::map<std::string, std::string>& params) {
  ApiRequest r;
  r.path = "/ui/api/" + path;
  r.params = params;
  ApiReply reply = api_->Handle(r);
  if (reply.status != 200) {
    const std::string message = reply.body["error"].value("message", std::string("HTTP error"));
    return Status(reply.status == 404 ? StatusCode::kNotFound : StatusCode::kInternal, message);
  }
  replies_[SnapshotKey(path, params)] = std::move(reply.body);
  return Status::Ok();
}

Status Snapshot::AddRun(const std::string& run_id) {
  TRACE_RETURN_IF_ERROR(Add("runs/" + run_id));
  const nlohmann::json& run = replies_["runs/" + run_id];
  for (const nlohmann::json& e : run["events"]) {
    TRACE_RETURN_IF_ERROR(
        Add("runs/" + run_id + "/events/" + std::to_string(e["seq"].get<uint64_t>())));
  }
  runs_.push_back(run["summary"]);
  replies_["runs"] = {{"runs", runs_}, {"next", nullptr}, {"scan_limited", false}};
  return Status::Ok();
}

void Snapshot::AddReplay(const std::string& run_id, nlohmann::json report) {
  replays_[run_id] = std::move(report);
}

std::string Snapshot::Html(const std::string& title, const std::string& start) const {
  const nlohmann::json data = {{"start", start}, {"replies", replies_}, {"replays", replays_}};
  const std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string html =
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"color-scheme\" content=\"light dark\">\n<title>" +
      replayer::HtmlEscape(title) + "</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>\n" +
      RawElementText(AssetContent("/app.css")) +
      "</style>\n</head>\n<body>\n<header class=\"top\">\n"
      "  <a class=\"brand\" href=\"#/\">trace</a>\n  <nav id=\"crumbs\" "
      "aria-label=\"Location\"></nav>\n"
      "  <span id=\"store\" class=\"muted\"></span>\n</header>\n"
      "<main id=\"main\" tabindex=\"-1\"><p class=\"muted\">Loading…</p></main>\n"
      "<script type=\"application/json\" id=\"trace-snapshot\">" +
      JsonForScript(json) + "</script>\n<script>\n" + RawElementText(AssetContent("/app.js")) +
      "</script>\n</body>\n</html>\n";
  return html;
}

namespace {

UiApiOptions AsStored() {
  UiApiOptions o;
  o.redaction.reset();
  return o;
}

}  // namespace

Result<std::string> ReplayPage(store::Store* store, const std::string& run_id,
                               nlohmann::json report) {
  TRACE_RETURN_IF_ERROR(AppMissing());
  UiApi api(store, AsStored());
  Snapshot snap(&api);
  TRACE_RETURN_IF_ERROR(snap.Add("store"));
  TRACE_RETURN_IF_ERROR(snap.AddRun(run_id));
  snap.AddReplay(run_id, std::move(report));
  return snap.Html("trace replay " + run_id, "#/run/" + run_id);
}

Result<std::string> DiffPage(store::Store* store, const std::string& a, const std::string& b) {
  TRACE_RETURN_IF_ERROR(AppMissing());
  UiApi api(store, AsStored());
  Snapshot snap(&api);
  TRACE_RETURN_IF_ERROR(snap.Add("store"));
  TRACE_RETURN_IF_ERROR(snap.Add("diff", {{"a", a}, {"b", b}}));
  TRACE_RETURN_IF_ERROR(snap.AddRun(a));
  if (b != a) TRACE_RETURN_IF_ERROR(snap.AddRun(b));
  return snap.Html("trace diff " + a + " " + b, "#/diff/" + a + "/" + b);
}

}  // namespace trace::ui
