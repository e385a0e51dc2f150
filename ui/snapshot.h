// Static pages of trace ui's views (`trace replay --html`, `trace diff --html`): one HTML
// file holding the app (its script and stylesheet inline) and a snapshot of the API
// replies the view needs, so the file opens in any browser, offline, without a server, and
// shows the same pages `trace ui` serves. The app answers its API calls from the snapshot
// (a call the snapshot lacks shows "not in this page").
//
// Ownership: values; Snapshot borrows the UiApi. Thread safety: one thread. Errors: a
// request the API refuses fails Add with its message (a run that cannot be read).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "ui/api.h"

namespace trace::ui {

class Snapshot {
 public:
  explicit Snapshot(UiApi* api) : api_(api) {}

  // Adds the API's reply to GET `path` with `params` (as the app will ask for it).
  Status Add(const std::string& path, const std::map<std::string, std::string>& params = {});
  // Adds a run: its page, every event of it, and it in the snapshot's run list.
  Status AddRun(const std::string& run_id);
  // A replay's report (`trace replay --json`) shown on the run's page instead of the
  // replay button.
  void AddReplay(const std::string& run_id, nlohmann::json report);

  // The page, opening at `start` (a hash route of the app, e.g. "#/run/ID").
  std::string Html(const std::string& title, const std::string& start) const;

 private:
  UiApi* api_;
  nlohmann::json replies_ = nlohmann::json::object();
  nlohmann::json replays_ = nlohmann::json::object();
  nlohmann::json runs_ = nlohmann::json::array();
};

// `trace replay --html`: the run's page (every event) with `report` (`replay --json`) in
// place of the replay button. Runs are shown as stored, as the CLI's other output is.
Result<std::string> ReplayPage(store::Store* store, const std::string& run_id,
                               nlohmann::json report);
// `trace diff --html`: the diff of runs `a` and `b` (full ids) and both runs' pages.
Result<std::string> DiffPage(store::Store* store, const std::string& a, const std::string& b);

// The key the app looks a reply up by: the path, then the parameters in name order
// ("diff?a=X&b=Y"); the same as ui/app/src/api.js's snapshotKey.
std::string SnapshotKey(const std::string& path, const std::map<std::string, std::string>& params);

}  // namespace trace::ui
