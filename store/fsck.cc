#include "store/fsck.h"

#include <filesystem>
#include <map>
#include <set>

#include "store/codec.h"
#include "store/run_reader.h"
#include "store/schema.h"
#include "store/sqlite_rows.h"
#include "store/store.h"
#include "store/store_location.h"

namespace trace::store {
namespace {

constexpr size_t kMaxProblems = 50;

// True (and `*text` without it) when `text` ends with the advice to run `trace fsck`, which
// fsck's own report has no use for.
bool StripFsckAdvice(std::string* text) {
  if (!text->ends_with(kRunFsckAdvice)) return false;
  text->resize(text->size() - kRunFsckAdvice.size());
  return true;
}

void Add(std::vector<std::string>* list, std::string line, int64_t* dropped) {
  StripFsckAdvice(&line);
  if (list->size() < kMaxProblems) {
    list->push_back(std::move(line));
  } else {
    ++*dropped;
  }
}

// "1..16, 18, 20..39" from sorted seqs.
std::string Ranges(const std::vector<uint64_t>& seqs) {
  std::string out;
  for (size_t i = 0; i < seqs.size();) {
    size_t j = i;
    while (j + 1 < seqs.size() && seqs[j + 1] == seqs[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(seqs[i]);
    if (j > i) out += ".." + std::to_string(seqs[j]);
    i = j + 1;
  }
  return out;
}

// The blob SHA-256s an events row refers to (without resolving them).
Result<std::vector<std::string>> BlobRefsOf(std::string_view payload, int encoding) {
  TRACE_ASSIGN_OR_RETURN(std::string bytes, Decompress(payload, encoding));
  proto::StoredEvent stored;
  if (!stored.ParseFromString(bytes)) return Corruption("payload does not parse");
  std::vector<std::string> out;
  for (const auto& ref : stored.blobs()) out.push_back(ref.sha256());
  return out;
}

void CheckRun(const OpenedStore& opened, Store& store, const RunSummary& summary,
              FsckReport* report) {
  FsckRun run;
  run.run_id = summary.run_id;
  run.status = std::string(RunStatusName(summary.status));
  run.counted_events = summary.events;
  int64_t dropped = 0;
  if (!summary.problem.empty()) Add(&run.problems, "runs row: " + summary.problem, &dropped);
  if (auto header = store.LoadHeader(summary.run_id); !header.ok()) {
    // A damaged runs row also fails LoadHeader; name the header only when it is the cause.
    if (summary.problem.empty()) {
      run.header_ok = false;
      Add(&run.problems, header.status().message(), &dropped);
    }
  }

  // Every row through the reader: checksums, decoding, density, count, RunEnd last.
  std::vector<uint64_t> readable;
  int64_t calls = 0, tokens = 0;
  bool saw_end = false;
  auto db = OpenConnection(opened.config, false);
  if (!db.ok()) {
    Add(&run.problems, db.status().message(), &dropped);
  } else {
    auto it = ReadRunEvents(NewSqliteRowConn(std::move(*db), opened.schema_version, false),
                            summary.run_id, 1);
    if (!it.ok()) {
      Add(&run.problems, it.status().message(), &dropped);
    } else {
      EventRecord rec;
      while ((*it)->Next(&rec)) {
        ++report->events_checked;
        if (!rec.status.ok()) {
          Add(&run.problems, rec.status.message(), &dropped);
          continue;
        }
        readable.push_back(rec.seq);
        if (rec.event.has_llm_call()) {
          ++calls;
          tokens += rec.event.llm_call().token_ids_size();
        }
        saw_end = saw_end || rec.event.has_run_end();
      }
      if (!(*it)->status().ok()) Add(&run.problems, (*it)->status().message(), &dropped);
    }
  }
  run.readable_events = static_cast<int64_t>(readable.size());
  run.readable_seqs = Ranges(readable);

  // Raw pass: row count, and every blob a row uses must be referenced by the run (else
  // `trace rm` of another run would free it).
  auto raw = OpenConnection(opened.config, false);
  if (raw.ok()) {
    Db& d = **raw;
    auto q = d.Prepare("SELECT seq, encoding, payload FROM events WHERE run_id=? ORDER BY seq");
    auto ref = d.Prepare(
        "SELECT (SELECT count(*) FROM blob_refs WHERE run_id=?1 AND sha256=?2), "
        "(SELECT count(*) FROM blobs WHERE sha256=?2)");
    if (q.ok() && ref.ok()) {
      q->Bind(1, summary.run_id);
      for (;;) {
        auto row = d.Step(*q);
        if (!row.ok()) {
          Add(&run.problems, row.status().message(), &dropped);
          break;
        }
        if (!*row) break;
        ++run.rows;
        auto shas = BlobRefsOf(q->Blob(2), static_cast<int>(q->Int(1)));
        if (!shas.ok()) continue;  // the reader pass reported this row
        for (const std::string& sha : *shas) {
          ref->Reset().Bind(1, summary.run_id).Bind(2, sha);
          auto r = d.Step(*ref);
          if (r.ok() && *r && ref->Int(0) == 0 && ref->Int(1) != 0) {
            Add(&run.problems,
                "seq " + std::to_string(q->Int(0)) + " uses blob " + sha +
                    " but the run does not reference it (deleting another run could free it)",
                &dropped);
          }
        }
      }
    }
  }

  // Summary counters against the events (only meaningful when every row reads).
  if (run.readable_events == summary.events && run.problems.empty()) {
    if (calls != summary.model_calls) {
      Add(&run.problems,
          "the summary counts " + std::to_string(summary.model_calls) +
              " model calls; the events hold " + std::to_string(calls),
          &dropped);
    }
    if (tokens != summary.sampled_tokens) {
      Add(&run.problems,
          "the summary counts " + std::to_string(summary.sampled_tokens) +
              " sampled tokens; the events hold " + std::to_string(tokens),
          &dropped);
    }
    if (saw_end != (summary.end_time_ns != 0)) {
      Add(&run.problems,
          std::string(saw_end ? "a RunEnd event but the summary has no end"
                              : "the summary has an end but there is no RunEnd event"),
          &dropped);
    }
  }
  if (dropped > 0) run.problems.push_back("... and " + std::to_string(dropped) + " more");
  if (!run.ok()) {
    run.salvage = std::to_string(run.readable_events) + " of " +
                  std::to_string(std::max(run.counted_events, run.rows)) + " events readable" +
                  (run.readable_seqs.empty() ? "" : " (seqs " + run.readable_seqs + ")") + "; " +
                  (run.header_ok ? "header intact" : "header lost") + "; `trace show " +
                  run.run_id + "` prints the readable events, `trace export` refuses the run";
  }
  report->runs.push_back(std::move(run));
}

void CheckBlobs(const OpenedStore& opened, FsckReport* report) {
  auto conn = OpenConnection(opened.config, false);
  if (!conn.ok()) {
    report->blob_problems.push_back(conn.status().message());
    return;
  }
  auto rows = NewSqliteRowConn(std::move(*conn), opened.schema_version, false);
  Db& d = *SqliteDbOf(rows.get());
  int64_t dropped = 0;
  RowDecoder decoder(rows.get(), "");
  std::vector<std::string> shas;
  {
    auto q = d.Prepare("SELECT sha256 FROM blobs ORDER BY sha256");
    if (!q.ok()) return report->blob_problems.push_back(q.status().message());
    for (;;) {
      auto row = d.Step(*q);
      if (!row.ok()) {
        report->blob_problems.push_back(row.status().message());
        break;
      }
      if (!*row) break;
      shas.push_back(q->Text(0));
    }
  }
  for (const std::string& sha : shas) {
    ++report->blobs_checked;
    auto content = decoder.Blob(sha);
    if (!content.ok()) Add(&report->blob_problems, content.status().message(), &dropped);
  }
  auto dangling = d.Prepare(
      "SELECT run_id, sha256 FROM blob_refs WHERE sha256 NOT IN (SELECT sha256 FROM "
      "blobs)");
  if (dangling.ok()) {
    while (true) {
      auto row = d.Step(*dangling);
      if (!row.ok() || !*row) break;
      Add(&report->blob_problems,
          "run " + dangling->Text(0) + " references blob " + dangling->Text(1) +
              ", which is missing",
          &dropped);
    }
  }
  const std::string unreferenced_sql = std::string(kLiveBlobsCte) +
                                       "SELECT count(*), coalesce(sum(length(data)), 0) FROM "
                                       "blobs WHERE sha256 NOT IN (SELECT sha256 FROM live)";
  auto unreferenced = d.Prepare(unreferenced_sql.c_str());
  if (unreferenced.ok()) {
    auto row = d.Step(*unreferenced);
    if (row.ok() && *row) {
      report->unreferenced_blobs = unreferenced->Int(0);
      report->unreferenced_blob_bytes = unreferenced->Int(1);
    }
  }
  if (dropped > 0) {
    report->blob_problems.push_back("... and " + std::to_string(dropped) + " more");
  }
  auto orphans = d.Prepare(
      "SELECT run_id, count(*) FROM events WHERE run_id NOT IN (SELECT run_id FROM runs) "
      "GROUP BY run_id ORDER BY run_id");
  if (orphans.ok()) {
    int64_t more = 0;
    while (true) {
      auto row = d.Step(*orphans);
      if (!row.ok() || !*row) break;
      Add(&report->orphan_problems,
          std::to_string(orphans->Int(1)) + " events rows of run '" + orphans->Text(0) +
              "', which has no runs row (its row is damaged, or a delete was cut off)",
          &more);
    }
  }
}

// `status` from opening the store, for `trace fsck` to print: the advice to run `trace
// fsck` (which is running) becomes SQLite's own salvage.
Status FsckOpenError(const std::string& path, const Status& status) {
  std::string m = status.message();
  if (!StripFsckAdvice(&m)) return status;
  return Status(status.code(), m + "; SQLite cannot read its structure: `sqlite3 " + path +
                                   " .recover | sqlite3 NEW.db` copies every readable row into "
                                   "a new file");
}

}  // namespace

int FsckReport::damaged_runs() const {
  int n = 0;
  for (const FsckRun& r : runs) n += !r.ok();
  return n;
}

bool FsckReport::clean() const {
  return sqlite_problems.empty() && blob_problems.empty() && orphan_problems.empty() &&
         damaged_runs() == 0;
}

Result<FsckReport> CheckStore(const std::string& path, const FsckOptions& options) {
  if (IsPostgresUrl(path)) {
    return Unsupported(path +
                       ": fsck checks SQLite store files; on PostgreSQL every read checks "
                       "row checksums and counts (`trace export` of a run reads all of it), "
                       "and the server's own tools (amcheck, pg_checksums) check its storage");
  }
  StoreOptions open;
  open.read_only = true;
  // An error of opening is the answer, in one line naming the file and what is wrong; one
  // that ends by telling the user to run `trace fsck` says what to try instead.
  auto opened_or = OpenStoreDb(path, open);
  if (!opened_or.ok()) return FsckOpenError(path, opened_or.status());
  OpenedStore opened = std::move(*opened_or);
  auto store_or = Store::Open(path, open);
  if (!store_or.ok()) return FsckOpenError(path, store_or.status());
  std::unique_ptr<Store> store = std::move(*store_or);
  FsckReport report;
  report.path = path;
  report.schema_version = opened.schema_version;
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    auto n = std::filesystem::file_size(path + suffix, ec);
    if (!ec) report.file_bytes += static_cast<int64_t>(n);
  }
  if (opened.schema_version < kSchemaVersion) {
    report.notes.push_back("schema version " + std::to_string(opened.schema_version) +
                           ": rows carry no checksums, so a changed row cannot be told from a "
                           "good one; opening the store writable (trace record) migrates it");
  }

  // SQLite's own check of the file structure (b-trees, free list, indexes).
  {
    std::string sql =
        options.full_sqlite_check ? "PRAGMA integrity_check(100)" : "PRAGMA quick_check(100)";
    auto q = opened.db->Prepare(sql.c_str());
    if (!q.ok()) {
      report.sqlite_problems.push_back(q.status().message());
    } else {
      for (;;) {
        auto row = opened.db->Step(*q);
        if (!row.ok()) {
          report.sqlite_problems.push_back(row.status().message());
          break;
        }
        if (!*row) break;
        std::string line = q->Text(0);
        if (line != "ok") report.sqlite_problems.push_back(line);
      }
    }
  }
  if (!report.sqlite_problems.empty()) {
    report.salvage = "SQLite found damage in the file's structure: `sqlite3 " + path +
                     " .recover | sqlite3 NEW.db` copies every readable row into a new file; "
                     "then run `trace --store NEW.db fsck`";
  }

  std::vector<RunSummary> runs;
  if (!options.run.empty()) {
    TRACE_ASSIGN_OR_RETURN(std::string id, store->ResolveRunId(options.run));
    auto all = store->ListRuns();
    if (!all.ok()) return all.status();
    for (auto& r : *all) {
      if (r.run_id == id) runs.push_back(std::move(r));
    }
  } else {
    auto all = store->ListRuns();
    if (!all.ok()) {
      report.sqlite_problems.push_back("listing runs: " + all.status().message());
    } else {
      runs = std::move(*all);
    }
  }
  for (const RunSummary& r : runs) CheckRun(opened, *store, r, &report);
  if (options.run.empty()) CheckBlobs(opened, &report);
  return report;
}

}  // namespace trace::store
