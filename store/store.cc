// The SQLite trace store (store/store.h). Layout and semantics: docs/trace-format.md.
#include "store/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/escape.h"
#include "base/hash.h"
#include "store/codec.h"

namespace trace::store {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- SQLite wrappers -----------------------------------------------------------------

class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  sqlite3_stmt* get() const { return s_; }
  sqlite3_stmt** out() { return &s_; }

  Stmt& Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s_, col))
             : std::string();
  }
  std::string_view Blob(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    int n = sqlite3_column_bytes(s_, col);
    return p ? std::string_view(static_cast<const char*>(p), n) : std::string_view();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// One connection to the store file.
class Db {
 public:
  ~Db() { sqlite3_close_v2(db_); }
  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

  static Result<std::unique_ptr<Db>> Open(const std::string& path, const StoreOptions& options,
                                          bool read_only) {
    auto db = std::unique_ptr<Db>(new Db);
    db->path_ = path;
    int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db->db_, flags, nullptr) != SQLITE_OK) {
      return IOError(path +
                     ": cannot open: " + (db->db_ ? sqlite3_errmsg(db->db_) : "out of memory"));
    }
    sqlite3_busy_timeout(db->db_, options.busy_timeout_ms);
    sqlite3_extended_result_codes(db->db_, 1);
    return db;
  }

  Status Error(std::string_view what) const {
    int code = sqlite3_errcode(db_);
    std::string msg = path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_);
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
      return Corruption(path_ + ": not a trace store (" + sqlite3_errmsg(db_) + ")");
    }
    return IOError(msg);
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string what = err ? err : "";
      sqlite3_free(err);
      Status st = Error(sql);
      return st.code() == StatusCode::kCorruption ? st : IOError(path_ + ": " + what);
    }
    return Status::Ok();
  }

  Result<Stmt> Prepare(const char* sql) {
    Stmt s;
    if (sqlite3_prepare_v2(db_, sql, -1, s.out(), nullptr) != SQLITE_OK) {
      return Error("prepare");
    }
    return s;
  }

  // Steps a statement: true for a row, false when done.
  Result<bool> Step(Stmt& s) {
    int rc = sqlite3_step(s.get());
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Error("query");
  }

  Status Run(Stmt& s) {
    TRACE_ASSIGN_OR_RETURN(bool row, Step(s));
    (void)row;
    return Status::Ok();
  }

 private:
  Db() = default;
  sqlite3* db_ = nullptr;
  std::string path_;
};

constexpr const char* kCreateSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  run_id TEXT PRIMARY KEY,
  start_time_ns INTEGER NOT NULL,
  header_encoding INTEGER NOT NULL,
  header BLOB NOT NULL,
  command TEXT NOT NULL,
  label TEXT NOT NULL,
  events INTEGER NOT NULL DEFAULT 0,
  model_calls INTEGER NOT NULL DEFAULT 0,
  sampled_tokens INTEGER NOT NULL DEFAULT 0,
  stored_bytes INTEGER NOT NULL DEFAULT 0,
  last_event_ns INTEGER NOT NULL,
  end_time_ns INTEGER,
  end_how INTEGER,
  exit_code INTEGER,
  signal INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs(start_time_ns);
CREATE TABLE IF NOT EXISTS events(
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  wall_time_ns INTEGER NOT NULL,
  encoding INTEGER NOT NULL,
  payload BLOB NOT NULL,
  PRIMARY KEY(run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs(
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  base_sha256 TEXT,
  prefix_len INTEGER NOT NULL,
  dict_sha256 TEXT,
  depth INTEGER NOT NULL,
  encoding INTEGER NOT NULL,
  data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blob_refs(
  run_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY(run_id, sha256)
) WITHOUT ROWID;
)sql";

// Migrations from version v to v+1, indexed by v. Version 0 is a file without tables.
Status MigrateFrom(Db& db, int version) {
  switch (version) {
    case 0:
      return db.Exec(kCreateSchema);
    default:
      return Internal(db.path() + ": no migration from schema version " + std::to_string(version));
  }
}

Result<int> ReadSchemaVersion(Db& db) {
  TRACE_ASSIGN_OR_RETURN(
      Stmt has_meta,
      db.Prepare("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'"));
  TRACE_ASSIGN_OR_RETURN(bool row, db.Step(has_meta));
  if (!row || has_meta.Int(0) == 0) {
    TRACE_ASSIGN_OR_RETURN(Stmt any, db.Prepare("SELECT count(*) FROM sqlite_master"));
    TRACE_ASSIGN_OR_RETURN(bool r2, db.Step(any));
    if (r2 && any.Int(0) != 0) {
      return FailedPrecondition(db.path() + ": SQLite file has tables but is not a trace store");
    }
    return 0;
  }
  TRACE_ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT value FROM meta WHERE key='schema_version'"));
  TRACE_ASSIGN_OR_RETURN(bool has, db.Step(q));
  if (!has) return Corruption(db.path() + ": meta table has no schema_version");
  std::string v = q.Text(0);
  try {
    return std::stoi(v);
  } catch (...) {
    return Corruption(db.path() + ": schema_version '" + EscapeForDisplay(v) + "' is not a number");
  }
}

std::string JoinArgv(const proto::RunHeader& header) {
  std::string out;
  for (const auto& a : header.argv()) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

RunStatus StatusFromEnd(bool has_end, int how) {
  if (!has_end) return RunStatus::kIncomplete;
  if (how == proto::RunEnd::SIGNALLED || how == proto::RunEnd::RECORDER_KILLED ||
      how == proto::RunEnd::RECORDER_ERROR) {
    return RunStatus::kCrashed;
  }
  return RunStatus::kComplete;
}

std::string RunContext(const std::string& path, const std::string& run_id) {
  return "run " + EscapeForDisplay(run_id) + " in " + path;
}

// ---- reading: blobs and prompts with caches -------------------------------------------

class RowDecoder {
 public:
  RowDecoder(Db* db, std::string run_id) : db_(db), run_id_(std::move(run_id)) {}

  Result<std::shared_ptr<const std::string>> Blob(const std::string& sha, int depth = 0) {
    if (auto it = blob_cache_.find(sha); it != blob_cache_.end()) return it->second;
    if (depth > kMaxBlobDepth) return Corruption("blob " + sha + ": dependency chain too deep");
    if (!blob_stmt_.get()) {
      TRACE_ASSIGN_OR_RETURN(blob_stmt_,
                             db_->Prepare("SELECT size, base_sha256, prefix_len, dict_sha256, "
                                          "encoding, data FROM blobs WHERE sha256=?"));
    }
    blob_stmt_.Reset().Bind(1, sha);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(blob_stmt_));
    if (!row) return Corruption("blob " + sha + " is missing");
    const int64_t size = blob_stmt_.Int(0);
    const std::string base_sha = blob_stmt_.IsNull(1) ? "" : blob_stmt_.Text(1);
    const int64_t prefix_len = blob_stmt_.Int(2);
    const std::string dict_sha = blob_stmt_.IsNull(3) ? "" : blob_stmt_.Text(3);
    const int encoding = static_cast<int>(blob_stmt_.Int(4));
    std::string data(blob_stmt_.Blob(5));
    blob_stmt_.Reset();
    if (base_sha == sha || dict_sha == sha) return Corruption("blob " + sha + " depends on itself");
    std::shared_ptr<const std::string> base, dict;
    if (!base_sha.empty()) {
      TRACE_ASSIGN_OR_RETURN(base, Blob(base_sha, depth + 1));
    }
    if (!dict_sha.empty()) {
      TRACE_ASSIGN_OR_RETURN(dict, Blob(dict_sha, depth + 1));
    }
    if (encoding == kEncodingZstdPrefix && !dict) {
      return Corruption("blob " + sha + ": prefix-compressed without a dictionary blob");
    }
    auto suffix = Decompress(data, encoding, dict ? std::string_view(*dict) : std::string_view());
    if (!suffix.ok()) return Corruption("blob " + sha + ": " + suffix.status().message());
    auto content = std::make_shared<std::string>();
    if (base) {
      if (prefix_len < 0 || static_cast<size_t>(prefix_len) > base->size()) {
        return Corruption("blob " + sha + ": prefix longer than its base");
      }
      content->assign(*base, 0, static_cast<size_t>(prefix_len));
    } else if (prefix_len != 0) {
      return Corruption("blob " + sha + ": prefix without a base");
    }
    content->append(*suffix);
    if (static_cast<int64_t>(content->size()) != size || Sha256Hex(*content) != sha) {
      return Corruption("blob " + sha + ": content does not match its SHA-256");
    }
    Remember(sha, content);
    return std::shared_ptr<const std::string>(content);
  }

  Result<std::shared_ptr<const std::vector<int32_t>>> Prompt(uint64_t seq) {
    if (auto it = prompt_cache_.find(seq); it != prompt_cache_.end()) return it->second;
    TRACE_ASSIGN_OR_RETURN(proto::Event e, Event(seq));
    if (!e.has_llm_call()) {
      return Corruption("seq " + std::to_string(seq) + " is not an LlmCall");
    }
    // Event() cached it.
    return prompt_cache_.at(seq);
  }

  // Reads and decodes one row by seq (recursing into prompt bases as needed).
  Result<proto::Event> Event(uint64_t seq) {
    if (!event_stmt_.get()) {
      TRACE_ASSIGN_OR_RETURN(event_stmt_, db_->Prepare("SELECT encoding, payload FROM events "
                                                       "WHERE run_id=? AND seq=?"));
    }
    event_stmt_.Reset().Bind(1, run_id_).Bind(2, static_cast<int64_t>(seq));
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(event_stmt_));
    if (!row) return NotFound("run " + run_id_ + " has no event with seq " + std::to_string(seq));
    int encoding = static_cast<int>(event_stmt_.Int(0));
    std::string payload(event_stmt_.Blob(1));
    return Decode(seq, payload, encoding);
  }

  Result<proto::Event> Decode(uint64_t seq, std::string_view payload, int encoding) {
    auto e = DecodeEventRow(
        seq, payload, encoding, [this](const std::string& sha) { return Blob(sha); },
        [this](uint64_t s) { return Prompt(s); });
    if (!e.ok()) {
      return Status(e.status().code(),
                    "run " + run_id_ + " seq " + std::to_string(seq) + ": " + e.status().message());
    }
    if (e->has_llm_call()) {
      prompt_cache_[seq] = std::make_shared<const std::vector<int32_t>>(
          e->llm_call().prompt_token_ids().begin(), e->llm_call().prompt_token_ids().end());
    }
    return e;
  }

 private:
  void Remember(const std::string& sha, std::shared_ptr<const std::string> content) {
    cached_bytes_ += content->size();
    if (cached_bytes_ > (size_t{256} << 20)) {
      blob_cache_.clear();
      cached_bytes_ = content->size();
    }
    blob_cache_[sha] = std::move(content);
  }

  static constexpr int kMaxBlobDepth = 1024;

  Db* db_;
  std::string run_id_;
  Stmt blob_stmt_;
  Stmt event_stmt_;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> blob_cache_;
  size_t cached_bytes_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<const std::vector<int32_t>>> prompt_cache_;
};

class EventIteratorImpl final : public EventIterator {
 public:
  EventIteratorImpl(std::unique_ptr<Db> db, std::string run_id, Stmt stmt)
      : db_(std::move(db)), decoder_(db_.get(), run_id), stmt_(std::move(stmt)) {}

  bool Next(EventRecord* record) override {
    if (!status_.ok() || done_) return false;
    auto row = db_->Step(stmt_);
    if (!row.ok()) {
      status_ = row.status();
      return false;
    }
    if (!*row) {
      done_ = true;
      return false;
    }
    record->seq = static_cast<uint64_t>(stmt_.Int(0));
    std::string payload(stmt_.Blob(2));
    record->stored_bytes = payload.size();
    auto e = decoder_.Decode(record->seq, payload, static_cast<int>(stmt_.Int(1)));
    if (e.ok()) {
      record->status = Status::Ok();
      record->event = std::move(*e);
    } else {
      record->status = e.status();
      record->event.Clear();
    }
    return true;
  }
  Status status() const override { return status_; }

 private:
  std::unique_ptr<Db> db_;
  RowDecoder decoder_;
  Stmt stmt_;
  Status status_;
  bool done_ = false;
};

// ---- writing -------------------------------------------------------------------------

class RunWriterImpl final : public RunWriter {
 public:
  RunWriterImpl(std::unique_ptr<Db> db, proto::RunHeader header, const WriterOptions& options)
      : db_(std::move(db)), header_(std::move(header)), options_(options) {
    run_id_ = header_.run_id();
    committer_ = std::thread([this] { CommitLoop(); });
  }

  ~RunWriterImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    committer_.join();
  }

  const std::string& run_id() const override { return run_id_; }

  Result<uint64_t> Append(proto::Event event) override {
    if (event.kind_case() == proto::Event::KIND_NOT_SET) {
      return InvalidArgument("run " + run_id_ + ": event has no kind");
    }
    Status valid = CheckUtf8(event);
    if (valid.ok() && event.has_llm_call()) valid = CheckTokenArrays(event.llm_call());
    if (!valid.ok()) return Status(valid.code(), "run " + run_id_ + ": " + valid.message());
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(
        lock, [&] { return queue_.size() < options_.max_queued_events || !error_.ok() || ended_; });
    if (!error_.ok()) return error_;
    if (ended_) return FailedPrecondition("run " + run_id_ + " has ended; cannot append");
    uint64_t seq = ++appended_seq_;
    event.set_seq(seq);
    if (event.wall_time_ns() == 0) event.set_wall_time_ns(NowNs());
    if (event.has_run_end()) {
      ended_ = true;
      flush_target_ = seq;
    }
    queue_.push_back(std::move(event));
    if (queue_.size() >= options_.max_batch_events || ended_) wake_.notify_all();
    return seq;
  }

  uint64_t durable_seq() const override { return durable_seq_.load(); }

  Status WaitDurable(uint64_t seq) override {
    std::unique_lock<std::mutex> lock(mu_);
    durable_.wait(lock, [&] { return durable_seq_.load() >= seq || !error_.ok(); });
    return durable_seq_.load() >= seq ? Status::Ok() : error_;
  }

  Status Flush() override {
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(mu_);
      target = appended_seq_;
      flush_target_ = std::max(flush_target_, target);
    }
    wake_.notify_all();
    return WaitDurable(target);
  }

  Status UpdateHeader(const proto::RunHeader& header) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto h = std::make_unique<proto::RunHeader>(header);
    h->set_run_id(run_id_);
    h->set_start_time_ns(header_.start_time_ns());
    if (h->format_version() == 0) h->set_format_version(proto::CURRENT_FORMAT_VERSION);
    header_ = *h;
    pending_header_ = std::move(h);
    return Status::Ok();
  }

  Result<uint64_t> End(proto::RunEnd end) override {
    proto::Event e;
    *e.mutable_run_end() = std::move(end);
    TRACE_ASSIGN_OR_RETURN(uint64_t seq, Append(std::move(e)));
    TRACE_RETURN_IF_ERROR(WaitDurable(seq));
    return seq;
  }

 private:
  void CommitLoop() {
    const auto interval = std::chrono::milliseconds(std::max(1, options_.commit_interval_ms));
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait_for(lock, interval, [&] {
        return stopping_ || queue_.size() >= options_.max_batch_events ||
               (flush_target_ > durable_seq_.load() && !queue_.empty());
      });
      if (queue_.empty() && !pending_header_) {
        if (stopping_) return;
        continue;
      }
      std::deque<proto::Event> batch;
      batch.swap(queue_);
      std::unique_ptr<proto::RunHeader> header = std::move(pending_header_);
      space_.notify_all();
      lock.unlock();
      uint64_t last = batch.empty() ? 0 : batch.back().seq();
      Status st = CommitBatch(&batch, header.get());
      lock.lock();
      if (!st.ok()) {
        if (error_.ok()) error_ = st;
        durable_.notify_all();
        space_.notify_all();
        // Keep draining so that destructors and waiters do not hang; nothing more commits.
        queue_.clear();
        if (stopping_) return;
        continue;
      }
      if (last) durable_seq_.store(last);
      durable_.notify_all();
    }
  }

  Status Prepare() {
    if (insert_event_.get()) return Status::Ok();
    TRACE_ASSIGN_OR_RETURN(insert_event_,
                           db_->Prepare("INSERT INTO events(run_id, seq, kind, wall_time_ns, "
                                        "encoding, payload) VALUES(?,?,?,?,?,?)"));
    TRACE_ASSIGN_OR_RETURN(blob_exists_, db_->Prepare("SELECT depth FROM blobs WHERE sha256=?"));
    TRACE_ASSIGN_OR_RETURN(insert_blob_,
                           db_->Prepare("INSERT OR IGNORE INTO blobs(sha256, size, base_sha256, "
                                        "prefix_len, dict_sha256, depth, encoding, data) "
                                        "VALUES(?,?,?,?,?,?,?,?)"));
    TRACE_ASSIGN_OR_RETURN(
        insert_ref_, db_->Prepare("INSERT OR IGNORE INTO blob_refs(run_id, sha256) VALUES(?,?)"));
    TRACE_ASSIGN_OR_RETURN(
        update_run_, db_->Prepare("UPDATE runs SET events=events+?, model_calls=model_calls+?, "
                                  "sampled_tokens=sampled_tokens+?, stored_bytes=stored_bytes+?, "
                                  "last_event_ns=max(last_event_ns, ?) WHERE run_id=?"));
    TRACE_ASSIGN_OR_RETURN(update_end_,
                           db_->Prepare("UPDATE runs SET end_time_ns=?, end_how=?, exit_code=?, "
                                        "signal=? WHERE run_id=?"));
    TRACE_ASSIGN_OR_RETURN(update_header_,
                           db_->Prepare("UPDATE runs SET header_encoding=?, header=?, command=?, "
                                        "label=? WHERE run_id=?"));
    return Status::Ok();
  }

  struct KnownBlob {
    std::string sha;
    std::shared_ptr<const std::string> content;
    int64_t depth;
  };

  // Stores `content` in the blob table (once per content), as a prefix delta against the
  // recent large string sharing the longest prefix with it. Returns its SHA-256.
  Result<std::string> PutBlob(std::string content, int64_t* new_bytes) {
    std::string sha = Sha256Hex(content);
    if (referenced_.count(sha)) return sha;
    blob_exists_.Reset().Bind(1, sha);
    TRACE_ASSIGN_OR_RETURN(bool exists, db_->Step(blob_exists_));
    int64_t depth = 0;
    if (exists) {
      depth = blob_exists_.Int(0);
      blob_exists_.Reset();
    } else {
      blob_exists_.Reset();
      // Base: the recent string sharing the longest prefix (the same field one turn
      // earlier, typically). Dictionary: the most recent other string (often holds the
      // text this one adds, e.g. the previous response inside the next request).
      const KnownBlob* best = nullptr;
      size_t best_len = 0;
      for (const KnownBlob& k : recent_) {
        size_t n = CommonPrefix(*k.content, content);
        if (n > best_len && k.depth < kMaxBlobDepth) {
          best_len = n;
          best = &k;
        }
      }
      if (best_len < 64) {
        best = nullptr;
        best_len = 0;
      }
      const KnownBlob* dict = nullptr;
      for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) {
        if (&*it != best && it->depth < kMaxBlobDepth) {
          dict = &*it;
          break;
        }
      }
      std::string_view stored = std::string_view(content).substr(best_len);
      int encoding;
      std::string data =
          dict ? CompressWithPrefix(stored, *dict->content, options_.zstd_level, &encoding)
               : CompressIfSmaller(stored, options_.zstd_level, &encoding);
      if (encoding != kEncodingZstdPrefix) dict = nullptr;
      depth = std::max(best ? best->depth + 1 : 0, dict ? dict->depth + 1 : 0);
      insert_blob_.Reset().Bind(1, sha).Bind(2, static_cast<int64_t>(content.size()));
      if (best) {
        insert_blob_.Bind(3, best->sha);
      } else {
        insert_blob_.BindNull(3);
      }
      insert_blob_.Bind(4, static_cast<int64_t>(best_len));
      if (dict) {
        insert_blob_.Bind(5, dict->sha);
      } else {
        insert_blob_.BindNull(5);
      }
      insert_blob_.Bind(6, depth).Bind(7, encoding).BindBlob(8, data);
      TRACE_RETURN_IF_ERROR(db_->Run(insert_blob_));
      *new_bytes += static_cast<int64_t>(data.size());
    }
    insert_ref_.Reset().Bind(1, run_id_).Bind(2, sha);
    TRACE_RETURN_IF_ERROR(db_->Run(insert_ref_));
    referenced_.insert(sha);
    recent_.push_back({sha, std::make_shared<const std::string>(std::move(content)), depth});
    if (recent_.size() > options_.history) recent_.pop_front();
    return sha;
  }

  // Event -> events row payload, storing its large strings as blobs.
  Status EncodeEvent(proto::Event* event, std::string* payload, int* encoding,
                     int64_t* blob_bytes) {
    proto::StoredEvent stored;
    if (event->has_llm_call()) {
      proto::LlmCall* call = event->mutable_llm_call();
      TRACE_RETURN_IF_ERROR(PackTokenColumns(*call, stored.mutable_tokens()));
      call->clear_token_ids();
      call->clear_logits_digests();
      call->clear_logits();
      call->clear_logprobs();
      call->clear_runner_up_ids();
      call->clear_runner_up_logits();
      call->clear_layer_digests();
      auto prompt = std::make_shared<std::vector<int32_t>>(call->prompt_token_ids().begin(),
                                                           call->prompt_token_ids().end());
      call->clear_prompt_token_ids();
      uint64_t base_seq = 0;
      size_t best = 0;
      for (const auto& [seq, ids] : recent_prompts_) {
        size_t n = CommonPrefix(*ids, *prompt);
        if (n >= best && n > 0) {
          best = n;
          base_seq = seq;
        }
      }
      proto::StoredPrompt* sp = stored.mutable_prompt();
      if (best >= 8) {
        sp->set_base_seq(base_seq);
        sp->set_prefix_len(static_cast<uint32_t>(best));
      } else {
        best = 0;
      }
      sp->mutable_suffix()->Add(prompt->begin() + best, prompt->end());
      recent_prompts_.emplace_back(event->seq(), std::move(prompt));
      if (recent_prompts_.size() > options_.history) recent_prompts_.pop_front();
    }
    // No field can reach blob size in an event smaller than that (the common small event).
    if (event->ByteSizeLong() >= options_.blob_min_bytes) {
      auto to_blob = [&](const std::vector<proto::FieldPathStep>& path,
                         std::string* value) -> Status {
        TRACE_ASSIGN_OR_RETURN(std::string sha, PutBlob(std::move(*value), blob_bytes));
        value->clear();
        proto::BlobRef* ref = stored.add_blobs();
        for (const auto& step : path) *ref->add_path() = step;
        ref->set_sha256(std::move(sha));
        return Status::Ok();
      };
      TRACE_RETURN_IF_ERROR(ForEachLargeField(event, options_.blob_min_bytes, to_blob));
    }
    event->clear_seq();  // the row key holds it
    *stored.mutable_event() = std::move(*event);
    std::string bytes = stored.SerializeAsString();
    *payload = CompressIfSmaller(bytes, options_.zstd_level, encoding);
    return Status::Ok();
  }

  Status CommitBatch(std::deque<proto::Event>* batch, const proto::RunHeader* header) {
    TRACE_RETURN_IF_ERROR(Prepare());
    Status st = db_->Exec("BEGIN IMMEDIATE");
    if (!st.ok()) return st.WithContext("run " + run_id_);
    st = WriteBatch(batch, header);
    if (st.ok()) st = db_->Exec("COMMIT");
    if (!st.ok()) {
      (void)db_->Exec("ROLLBACK");
      // The blob bookkeeping of this batch was rolled back too.
      referenced_.clear();
      recent_.clear();
      return st.WithContext("run " + run_id_);
    }
    return Status::Ok();
  }

  Status WriteBatch(std::deque<proto::Event>* batch, const proto::RunHeader* header) {
    int64_t bytes = 0, calls = 0, tokens = 0, last_ns = 0;
    if (header) {
      int enc;
      std::string h = CompressIfSmaller(header->SerializeAsString(), options_.zstd_level, &enc);
      update_header_.Reset().Bind(1, enc).BindBlob(2, h).Bind(3, JoinArgv(*header));
      update_header_.Bind(4, header->label()).Bind(5, run_id_);
      TRACE_RETURN_IF_ERROR(db_->Run(update_header_));
    }
    std::optional<proto::RunEnd> end;
    int64_t end_ns = 0;
    for (proto::Event& event : *batch) {
      const int64_t seq = static_cast<int64_t>(event.seq());
      const int64_t wall = event.wall_time_ns();
      const int kind = static_cast<int>(event.kind_case());
      if (event.has_llm_call()) {
        ++calls;
        tokens += event.llm_call().token_ids_size();
      }
      if (event.has_run_end()) {
        end = event.run_end();
        end_ns = wall;
      }
      std::string payload;
      int encoding;
      TRACE_RETURN_IF_ERROR(EncodeEvent(&event, &payload, &encoding, &bytes));
      insert_event_.Reset().Bind(1, run_id_).Bind(2, seq).Bind(3, kind).Bind(4, wall);
      insert_event_.Bind(5, encoding).BindBlob(6, payload);
      TRACE_RETURN_IF_ERROR(db_->Run(insert_event_));
      bytes += static_cast<int64_t>(payload.size());
      last_ns = std::max(last_ns, wall);
    }
    update_run_.Reset().Bind(1, static_cast<int64_t>(batch->size())).Bind(2, calls);
    update_run_.Bind(3, tokens).Bind(4, bytes).Bind(5, last_ns).Bind(6, run_id_);
    TRACE_RETURN_IF_ERROR(db_->Run(update_run_));
    if (sqlite3_changes(db_->get()) == 0) {
      return NotFound("run " + run_id_ + " was deleted from " + db_->path() +
                      " while being recorded");
    }
    if (end) {
      update_end_.Reset().Bind(1, end_ns).Bind(2, end->how()).Bind(3, end->exit_code());
      update_end_.Bind(4, end->signal()).Bind(5, run_id_);
      TRACE_RETURN_IF_ERROR(db_->Run(update_end_));
    }
    return Status::Ok();
  }

  // Bounds the reader's recursion through base/dictionary blobs.
  static constexpr int64_t kMaxBlobDepth = 512;

  std::unique_ptr<Db> db_;
  proto::RunHeader header_;
  const WriterOptions options_;
  std::string run_id_;

  std::mutex mu_;
  std::condition_variable wake_;     // committer: work to do
  std::condition_variable durable_;  // waiters: durable_seq_ moved or an error
  std::condition_variable space_;    // appenders: queue has room
  std::deque<proto::Event> queue_;
  std::unique_ptr<proto::RunHeader> pending_header_;
  uint64_t appended_seq_ = 0;
  uint64_t flush_target_ = 0;
  std::atomic<uint64_t> durable_seq_{0};
  bool ended_ = false;
  bool stopping_ = false;
  Status error_;
  std::thread committer_;

  // Committer-thread state.
  Stmt insert_event_, blob_exists_, insert_blob_, insert_ref_, update_run_, update_end_,
      update_header_;
  std::unordered_set<std::string> referenced_;  // blobs this run already references
  std::deque<KnownBlob> recent_;
  std::deque<std::pair<uint64_t, std::shared_ptr<const std::vector<int32_t>>>> recent_prompts_;
};

// ---- the store -------------------------------------------------------------------------

class StoreImpl final : public Store {
 public:
  StoreImpl(std::string path, StoreOptions options, std::unique_ptr<Db> db)
      : path_(std::move(path)), options_(options), db_(std::move(db)) {}

  const std::string& path() const override { return path_; }

  Result<std::unique_ptr<RunWriter>> BeginRun(proto::RunHeader header,
                                              const WriterOptions& options) override {
    if (options_.read_only) return FailedPrecondition(path_ + ": store is open read-only");
    if (header.run_id().empty()) {
      header.set_run_id(NewRunId());
    } else if (!IsValidRunId(header.run_id())) {
      return InvalidArgument("run id '" + EscapeForDisplay(header.run_id()) + "' is not a ULID");
    }
    if (header.format_version() == 0) header.set_format_version(proto::CURRENT_FORMAT_VERSION);
    if (header.start_time_ns() == 0) header.set_start_time_ns(NowNs());
    TRACE_ASSIGN_OR_RETURN(auto db, OpenConnection());
    int enc;
    std::string h = CompressIfSmaller(header.SerializeAsString(), options.zstd_level, &enc);
    TRACE_ASSIGN_OR_RETURN(
        Stmt ins, db->Prepare("INSERT INTO runs(run_id, start_time_ns, header_encoding, header, "
                              "command, label, stored_bytes, last_event_ns) "
                              "VALUES(?,?,?,?,?,?,?,?)"));
    ins.Bind(1, header.run_id()).Bind(2, header.start_time_ns()).Bind(3, enc).BindBlob(4, h);
    ins.Bind(5, JoinArgv(header)).Bind(6, header.label()).Bind(7, static_cast<int64_t>(h.size()));
    ins.Bind(8, header.start_time_ns());
    if (sqlite3_step(ins.get()) != SQLITE_DONE) {
      if (sqlite3_extended_errcode(db->get()) == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return AlreadyExists("run " + header.run_id() + " already exists in " + path_);
      }
      return db->Error("creating run " + header.run_id());
    }
    return std::unique_ptr<RunWriter>(new RunWriterImpl(std::move(db), std::move(header), options));
  }

  Result<std::vector<RunSummary>> ListRuns(size_t limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string sql = std::string(kSummarySelect) + " ORDER BY start_time_ns DESC, run_id DESC";
    if (limit > 0) sql += " LIMIT " + std::to_string(limit);
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare(sql.c_str()));
    std::vector<RunSummary> out;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      out.push_back(SummaryFromRow(q));
    }
    return out;
  }

  Result<RunSummary> GetRunSummary(const std::string& run_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string sql = std::string(kSummarySelect) + " WHERE run_id=?";
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare(sql.c_str()));
    q.Bind(1, run_id);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    if (!row) return NoSuchRun(run_id);
    return SummaryFromRow(q);
  }

  Result<std::string> ResolveRunId(std::string_view id_or_prefix) override {
    std::string prefix(id_or_prefix);
    for (char& c : prefix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (prefix.empty()) return InvalidArgument("empty run id");
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(Stmt q,
                           db_->Prepare("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? "
                                        "ORDER BY run_id LIMIT 11"));
    q.Bind(1, prefix).Bind(2, prefix + "\x7f");
    std::vector<std::string> matches;
    while (true) {
      TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
      if (!row) break;
      matches.push_back(q.Text(0));
    }
    if (matches.empty()) return NoSuchRun(std::string(id_or_prefix));
    if (matches.size() == 1 || matches[0] == prefix) return matches[0];
    std::string list;
    for (size_t i = 0; i < matches.size() && i < 10; ++i) {
      list += (i ? ", " : "") + EscapeForDisplay(matches[i]);
    }
    if (matches.size() > 10) list += ", ...";
    return InvalidArgument("run id prefix '" + EscapeForDisplay(id_or_prefix) +
                           "' is ambiguous in " + path_ + ": " + list);
  }

  Result<proto::RunHeader> LoadHeader(const std::string& run_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(Stmt q,
                           db_->Prepare("SELECT header_encoding, header FROM runs WHERE run_id=?"));
    q.Bind(1, run_id);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    if (!row) return NoSuchRun(run_id);
    auto bytes = Decompress(q.Blob(1), static_cast<int>(q.Int(0)));
    proto::RunHeader header;
    if (!bytes.ok() || !header.ParseFromString(*bytes)) {
      return Corruption(RunContext(path_, run_id) + ": header row does not decode" +
                        (bytes.ok() ? "" : " (" + bytes.status().message() + ")"));
    }
    return header;
  }

  Result<std::unique_ptr<EventIterator>> ReadEvents(const std::string& run_id,
                                                    uint64_t from_seq) override {
    TRACE_RETURN_IF_ERROR(CheckRunExists(run_id));
    TRACE_ASSIGN_OR_RETURN(auto db, OpenConnection());
    TRACE_ASSIGN_OR_RETURN(Stmt q, db->Prepare("SELECT seq, encoding, payload FROM events "
                                               "WHERE run_id=? AND seq>=? ORDER BY seq"));
    q.Bind(1, run_id).Bind(2, static_cast<int64_t>(from_seq));
    return std::unique_ptr<EventIterator>(
        new EventIteratorImpl(std::move(db), run_id, std::move(q)));
  }

  Result<proto::Event> ReadEvent(const std::string& run_id, uint64_t seq) override {
    TRACE_RETURN_IF_ERROR(CheckRunExists(run_id));
    std::lock_guard<std::mutex> lock(mu_);
    RowDecoder decoder(db_.get(), run_id);
    return decoder.Event(seq);
  }

  Result<std::vector<proto::Event>> LoadEvents(const std::string& run_id) override {
    TRACE_ASSIGN_OR_RETURN(auto it, ReadEvents(run_id, 1));
    std::vector<proto::Event> out;
    EventRecord rec;
    while (it->Next(&rec)) {
      TRACE_RETURN_IF_ERROR(rec.status);
      out.push_back(std::move(rec.event));
    }
    TRACE_RETURN_IF_ERROR(it->status());
    return out;
  }

  Status DeleteRun(const std::string& run_id) override {
    if (options_.read_only) return FailedPrecondition(path_ + ": store is open read-only");
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    Status st = DeleteInTransaction(run_id);
    if (st.ok()) st = db_->Exec("COMMIT");
    if (!st.ok()) (void)db_->Exec("ROLLBACK");
    return st;
  }

  Result<StoreStats> Stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    StoreStats s;
    TRACE_ASSIGN_OR_RETURN(
        Stmt q, db_->Prepare("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events), "
                             "(SELECT count(*) FROM blobs), "
                             "(SELECT coalesce(sum(length(payload)),0) FROM events), "
                             "(SELECT coalesce(sum(length(data)),0) FROM blobs)"));
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    if (row) {
      s.runs = q.Int(0);
      s.events = q.Int(1);
      s.blobs = q.Int(2);
      s.event_payload_bytes = q.Int(3);
      s.blob_bytes = q.Int(4);
    }
    std::error_code ec;
    for (const char* suffix : {"", "-wal"}) {
      auto n = std::filesystem::file_size(path_ + suffix, ec);
      if (!ec) s.file_bytes += static_cast<int64_t>(n);
    }
    return s;
  }

  Result<std::unique_ptr<Db>> OpenConnection() {
    TRACE_ASSIGN_OR_RETURN(auto db, Db::Open(path_, options_, options_.read_only));
    TRACE_RETURN_IF_ERROR(
        db->Exec(options_.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
    return db;
  }

 private:
  static constexpr const char* kSummarySelect =
      "SELECT run_id, start_time_ns, last_event_ns, end_time_ns, command, label, events, "
      "model_calls, sampled_tokens, end_how, exit_code, signal, stored_bytes FROM runs";

  static RunSummary SummaryFromRow(const Stmt& q) {
    RunSummary s;
    s.run_id = q.Text(0);
    s.start_time_ns = q.Int(1);
    s.last_event_ns = q.Int(2);
    s.end_time_ns = q.IsNull(3) ? 0 : q.Int(3);
    s.command = q.Text(4);
    s.label = q.Text(5);
    s.events = q.Int(6);
    s.model_calls = q.Int(7);
    s.sampled_tokens = q.Int(8);
    s.status = StatusFromEnd(!q.IsNull(3), static_cast<int>(q.Int(9)));
    s.exit_code = static_cast<int32_t>(q.Int(10));
    s.signal = static_cast<int32_t>(q.Int(11));
    s.stored_bytes = q.Int(12);
    return s;
  }

  Status NoSuchRun(const std::string& id) const {
    return NotFound("no run matches '" + EscapeForDisplay(id) + "' in " + path_);
  }

  Status CheckRunExists(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu_);
    TRACE_ASSIGN_OR_RETURN(Stmt q, db_->Prepare("SELECT 1 FROM runs WHERE run_id=?"));
    q.Bind(1, run_id);
    TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(q));
    return row ? Status::Ok() : NoSuchRun(run_id);
  }

  Status DeleteInTransaction(const std::string& run_id) {
    TRACE_ASSIGN_OR_RETURN(Stmt del_run, db_->Prepare("DELETE FROM runs WHERE run_id=?"));
    del_run.Bind(1, run_id);
    TRACE_RETURN_IF_ERROR(db_->Run(del_run));
    if (sqlite3_changes(db_->get()) == 0) return NoSuchRun(run_id);
    for (const char* sql :
         {"DELETE FROM events WHERE run_id=?", "DELETE FROM blob_refs WHERE run_id=?"}) {
      TRACE_ASSIGN_OR_RETURN(Stmt d, db_->Prepare(sql));
      d.Bind(1, run_id);
      TRACE_RETURN_IF_ERROR(db_->Run(d));
    }
    // Blobs live while a run references them or a live blob depends on them.
    return db_->Exec(
        "WITH RECURSIVE live(sha256) AS ("
        "  SELECT sha256 FROM blob_refs"
        "  UNION SELECT b.base_sha256 FROM blobs b JOIN live l ON b.sha256 = l.sha256"
        "  WHERE b.base_sha256 IS NOT NULL"
        "  UNION SELECT b.dict_sha256 FROM blobs b JOIN live l ON b.sha256 = l.sha256"
        "  WHERE b.dict_sha256 IS NOT NULL)"
        "DELETE FROM blobs WHERE sha256 NOT IN (SELECT sha256 FROM live)");
  }

  std::string path_;
  StoreOptions options_;
  std::mutex mu_;  // guards db_
  std::unique_ptr<Db> db_;
};

}  // namespace

std::string_view RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kComplete:
      return "complete";
    case RunStatus::kIncomplete:
      return "incomplete";
    case RunStatus::kCrashed:
      return "crashed";
  }
  return "unknown";
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  if (path.empty()) return InvalidArgument("empty store path");
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (!exists) {
    if (!options.create_if_missing || options.read_only) {
      return NotFound(path + ": no such store file");
    }
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::filesystem::create_directories(parent, ec);
      if (ec) return IOError(path + ": cannot create directory: " + ec.message());
    }
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return IOError(path + ": cannot create: " + std::strerror(errno));
    ::close(fd);
  } else if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument(path + ": is a directory, not a store file");
  }
  TRACE_ASSIGN_OR_RETURN(auto db, Db::Open(path, options, options.read_only));
  if (!options.read_only) {
    // Read the header page first so that a foreign file gives a clear error.
    TRACE_ASSIGN_OR_RETURN(int probe, ReadSchemaVersion(*db));
    (void)probe;
    TRACE_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL"));
  }
  TRACE_ASSIGN_OR_RETURN(int version, ReadSchemaVersion(*db));
  if (version > kSchemaVersion) {
    return FailedPrecondition(path + ": store schema version " + std::to_string(version) +
                              " is newer than this trace build supports (" +
                              std::to_string(kSchemaVersion) + "); upgrade trace");
  }
  if (version < kSchemaVersion) {
    if (options.read_only) {
      if (version == 0) return FailedPrecondition(path + ": empty file, not a trace store");
      return FailedPrecondition(path + ": store schema version " + std::to_string(version) +
                                " needs migration; open it writable once");
    }
    TRACE_RETURN_IF_ERROR(db->Exec("BEGIN IMMEDIATE"));
    // Another process may have migrated meanwhile.
    auto again = ReadSchemaVersion(*db);
    Status st = again.status();
    for (int v = again.ok() ? *again : kSchemaVersion; st.ok() && v < kSchemaVersion; ++v) {
      st = MigrateFrom(*db, v);
      if (st.ok()) {
        std::string sql = "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', '" +
                          std::to_string(v + 1) + "')";
        st = db->Exec(sql.c_str());
      }
    }
    if (st.ok()) st = db->Exec("COMMIT");
    if (!st.ok()) {
      (void)db->Exec("ROLLBACK");
      return st;
    }
  }
  ::chmod(path.c_str(), 0600);
  TRACE_RETURN_IF_ERROR(
      db->Exec(options.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  return std::unique_ptr<Store>(new StoreImpl(path, options, std::move(db)));
}

}  // namespace trace::store
