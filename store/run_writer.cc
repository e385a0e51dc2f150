#include "store/run_writer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>

#include "base/hash.h"
#include "proto/llm_call_tokens.h"
#include "store/codec.h"

namespace trace::store {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The header's columns of a runs row.
void SetHeaderColumns(const proto::RunHeader& header, int zstd_level, RunRow* row) {
  int enc;
  row->header = CompressIfSmaller(header.SerializeAsString(), zstd_level, &enc);
  row->header_encoding = enc;
  row->command.clear();
  for (const auto& a : header.argv()) {
    if (!row->command.empty()) row->command += ' ';
    row->command += a;
  }
  row->label = header.label();
}

class RunWriterImpl final : public RunWriter {
 public:
  RunWriterImpl(std::unique_ptr<RowConn> conn, proto::RunHeader header, RunRow row,
                const WriterOptions& options)
      : conn_(std::move(conn)),
        header_(std::move(header)),
        options_(options),
        row_(std::move(row)) {
    run_id_ = header_.run_id();
    // Each try at the lock waits this long inside the database; the committer retries
    // forever.
    conn_->SetLockWait(options_.lock_report_ms);
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
    if (event.wall_time_ns() == 0) event.set_wall_time_ns(WallClockNs());
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
    if (durable_seq_.load() >= seq) return Status::Ok();
    if (!error_.ok()) return error_;
    if (seq > appended_seq_) {
      return InvalidArgument("run " + run_id_ + ": seq " + std::to_string(seq) +
                             " was never appended");
    }
    // Group commit: ask for a commit now; whatever is queued by the time the committer
    // runs goes into the same transaction.
    if (flush_target_ < seq) {
      flush_target_ = seq;
      wake_.notify_all();
    }
    durable_.wait(lock, [&] { return durable_seq_.load() >= seq || !error_.ok(); });
    return durable_seq_.load() >= seq ? Status::Ok() : error_;
  }

  Status Flush() override {
    uint64_t target, header_gen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      target = appended_seq_;
      header_gen = header_gen_;
      if (durable_header_gen_ < header_gen) {
        flush_header_ = true;
        wake_.notify_all();
      }
    }
    TRACE_RETURN_IF_ERROR(WaitDurable(target));
    std::unique_lock<std::mutex> lock(mu_);
    durable_.wait(lock, [&] { return durable_header_gen_ >= header_gen || !error_.ok(); });
    return durable_header_gen_ >= header_gen ? Status::Ok() : error_;
  }

  WriterHealth health() const override {
    std::lock_guard<std::mutex> lock(mu_);
    WriterHealth h = health_;
    h.durable_seq = durable_seq_.load();
    h.pending_events = static_cast<size_t>(appended_seq_ - h.durable_seq);
    return h;
  }

  Status UpdateHeader(const proto::RunHeader& header) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto h = std::make_unique<proto::RunHeader>(header);
    h->set_run_id(run_id_);
    h->set_start_time_ns(header_.start_time_ns());
    if (h->format_version() == 0) h->set_format_version(proto::CURRENT_FORMAT_VERSION);
    if (!h->has_recorder()) *h->mutable_recorder() = header_.recorder();
    header_ = *h;
    pending_header_ = std::move(h);
    ++header_gen_;
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
               (flush_target_ > durable_seq_.load() && !queue_.empty()) ||
               (flush_header_ && pending_header_);
      });
      if (!error_.ok()) {
        queue_.clear();
        pending_header_.reset();
        if (stopping_) return;
        continue;
      }
      if (queue_.empty() && !pending_header_) {
        if (stopping_) return;
        continue;
      }
      std::deque<proto::Event> batch;
      batch.swap(queue_);
      std::unique_ptr<proto::RunHeader> header = std::move(pending_header_);
      const uint64_t header_gen = header_gen_;
      flush_header_ = false;
      space_.notify_all();
      lock.unlock();
      const uint64_t last = batch.empty() ? 0 : batch.back().seq();
      Status st = CommitBatch(&batch, header.get());
      lock.lock();
      if (!st.ok()) {
        const uint64_t durable = durable_seq_.load();
        Status failure =
            Unavailable("run " + run_id_ + ": the store cannot take writes (" + st.message() +
                        "); events after seq " + std::to_string(durable) + " were not stored");
        WriterHealth report;
        report.state = WriterHealth::State::kFailed;
        report.status = failure;
        report.durable_seq = durable;
        report.pending_events = static_cast<size_t>(appended_seq_ - durable);
        // The terminal hears of it before any waiter gets the error (and answers 503).
        lock.unlock();
        if (options_.on_health) options_.on_health(report);
        lock.lock();
        error_ = failure;
        health_.state = WriterHealth::State::kFailed;
        health_.status = failure;
        health_.waited_ms = 0;
        queue_.clear();
        pending_header_.reset();
        durable_.notify_all();
        space_.notify_all();
        if (stopping_) return;
        continue;
      }
      if (last) durable_seq_.store(last);
      if (header) durable_header_gen_ = std::max(durable_header_gen_, header_gen);
      durable_.notify_all();
    }
  }

  // Sets health_ and tells on_health (from the committer thread, without mu_ held).
  void Report(WriterHealth::State state, Status status, int64_t waited_ms) {
    WriterHealth report;
    {
      std::lock_guard<std::mutex> lock(mu_);
      health_.state = state;
      health_.status = std::move(status);
      health_.waited_ms = waited_ms;
      report = health_;
      report.durable_seq = durable_seq_.load();
      report.pending_events = static_cast<size_t>(appended_seq_ - report.durable_seq);
    }
    if (options_.on_health) options_.on_health(report);
  }

  // Waiting for a lock another connection holds: after lock_report_ms it is reported
  // (kWaitingForLock), and its end too (kOk).
  struct LockWait {
    SteadyClock::time_point start = SteadyClock::now();
    bool reported = false;
    int pause_ms = 1;
  };
  // Pauses before the next try; reports the wait once it has lasted lock_report_ms.
  void WaitForLock(LockWait* wait, const Status& st) {
    const int64_t waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - wait->start)
            .count();
    if (!wait->reported && waited >= options_.lock_report_ms) {
      wait->reported = true;
      Report(WriterHealth::State::kWaitingForLock,
             Unavailable(conn_->name() + ": another process holds the write lock (" + st.message() +
                         "); run " + run_id_ + " keeps its events and retries"),
             waited);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait->pause_ms));
    wait->pause_ms = std::min(wait->pause_ms * 2, 50);
  }
  void LockWaitOver(const LockWait& wait) {
    if (wait.reported) Report(WriterHealth::State::kOk, Status::Ok(), 0);
  }

  // Runs `op` (one database call) until it gets through or fails for a reason other than
  // a lock another connection holds. Waiting has no limit: a batch is never dropped
  // because someone else held the lock. A failure that aborted the whole transaction
  // (Retry::kTransaction) is returned with aborted_ set: CommitBatch redoes the batch.
  template <typename Op>
  Status Retrying(Op op) {
    LockWait wait;
    for (;;) {
      Status st = op();
      const Retry retry = st.ok() ? Retry::kNo : conn_->retry();
      if (retry != Retry::kStatement) {
        LockWaitOver(wait);
        aborted_ = retry == Retry::kTransaction;
        return st;
      }
      WaitForLock(&wait, st);
    }
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
    std::optional<int64_t> existing;
    TRACE_RETURN_IF_ERROR(Retrying([&] {
      auto d = conn_->BlobDepth(sha);
      if (d.ok()) existing = *d;
      return d.status();
    }));
    int64_t depth = 0;
    if (existing) {
      depth = *existing;
    } else {
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
      BlobRow blob;
      blob.sha256 = sha;
      blob.size = static_cast<int64_t>(content.size());
      if (best) blob.base_sha256 = best->sha;
      blob.prefix_len = static_cast<int64_t>(best_len);
      if (dict) blob.dict_sha256 = dict->sha;
      blob.depth = depth;
      blob.encoding = encoding;
      blob.data = std::move(data);
      TRACE_RETURN_IF_ERROR(Retrying([&] { return conn_->InsertBlob(blob); }));
      *new_bytes += static_cast<int64_t>(blob.data.size());
    }
    TRACE_RETURN_IF_ERROR(Retrying([&] { return conn_->InsertBlobRef(run_id_, sha); }));
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
      proto::ClearSampledTokenArrays(call);
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

  // One transaction for the batch. A transaction the database aborted (deadlock, lock
  // timeout on PostgreSQL) is redone from the start, from a copy of the batch.
  Status CommitBatch(std::deque<proto::Event>* batch, const proto::RunHeader* header) {
    LockWait wait;
    const bool may_abort = conn_->aborts_transactions();
    for (;;) {
      const auto prompts = recent_prompts_;
      std::deque<proto::Event> copy;
      if (may_abort) copy = *batch;
      Status st = Retrying([&] { return conn_->BeginWrite(); });
      RunRow next = row_;
      if (st.ok()) st = WriteBatch(may_abort ? &copy : batch, header, &next);
      // A busy COMMIT leaves the transaction open: retrying it is safe.
      if (st.ok()) st = Retrying([&] { return conn_->Commit(); });
      if (st.ok()) {
        LockWaitOver(wait);
        row_ = std::move(next);
        return Status::Ok();
      }
      const bool redo = aborted_ && may_abort;
      conn_->Rollback();
      // The blob bookkeeping of this batch was rolled back too.
      referenced_.clear();
      recent_.clear();
      recent_prompts_ = prompts;
      if (!redo) return st;  // the writer's failure message names the run
      WaitForLock(&wait, st);
    }
  }

  Status WriteBatch(std::deque<proto::Event>* batch, const proto::RunHeader* header, RunRow* row) {
    if (header) SetHeaderColumns(*header, options_.zstd_level, row);
    for (proto::Event& event : *batch) {
      const int64_t seq = static_cast<int64_t>(event.seq());
      const int64_t wall = event.wall_time_ns();
      const int kind = static_cast<int>(event.kind_case());
      if (event.has_llm_call()) {
        ++row->model_calls;
        row->sampled_tokens += event.llm_call().token_ids_size();
      }
      if (event.has_run_end()) {
        row->ended = true;
        row->end_time_ns = wall;
        row->end_how = event.run_end().how();
        row->exit_code = event.run_end().exit_code();
        row->signal = event.run_end().signal();
      }
      std::string payload;
      int encoding;
      TRACE_RETURN_IF_ERROR(EncodeEvent(&event, &payload, &encoding, &row->stored_bytes));
      EventRow stored;
      stored.seq = seq;
      stored.kind = kind;
      stored.wall_time_ns = wall;
      stored.encoding = encoding;
      stored.payload = std::move(payload);
      TRACE_RETURN_IF_ERROR(Retrying([&] { return conn_->InsertEvent(run_id_, stored); }));
      row->stored_bytes += static_cast<int64_t>(stored.payload.size());
      row->last_event_ns = std::max(row->last_event_ns, wall);
      ++row->events;
    }
    bool updated = false;
    TRACE_RETURN_IF_ERROR(Retrying([&] {
      auto r = conn_->UpdateRun(*row);
      if (r.ok()) updated = *r;
      return r.status();
    }));
    if (!updated) {
      return NotFound("run " + run_id_ + " was deleted from " + conn_->name() +
                      " while being recorded");
    }
    return Status::Ok();
  }

  // Bounds the reader's recursion through base/dictionary blobs.
  static constexpr int64_t kMaxBlobDepth = 512;

  std::unique_ptr<RowConn> conn_;
  proto::RunHeader header_;
  const WriterOptions options_;
  std::string run_id_;

  // guards: queue_, pending_header_, header_gen_, durable_header_gen_, flush_header_,
  // appended_seq_, flush_target_, ended_, stopping_, error_, health_ (durable_seq_, atomic,
  // is stored under it and read without it)
  mutable std::mutex mu_;
  std::condition_variable wake_;     // committer: work to do
  std::condition_variable durable_;  // waiters: durable_seq_ moved or an error
  std::condition_variable space_;    // appenders: queue has room
  std::deque<proto::Event> queue_;
  std::unique_ptr<proto::RunHeader> pending_header_;
  uint64_t header_gen_ = 0;          // UpdateHeader calls so far
  uint64_t durable_header_gen_ = 0;  // the latest of them committed
  bool flush_header_ = false;
  uint64_t appended_seq_ = 0;
  uint64_t flush_target_ = 0;
  std::atomic<uint64_t> durable_seq_{0};
  bool ended_ = false;
  bool stopping_ = false;
  Status error_;
  WriterHealth health_;
  std::thread committer_;

  // Committer-thread state.
  RunRow row_;                                  // the runs row as committed
  bool aborted_ = false;                        // the last failed call aborted the transaction
  std::unordered_set<std::string> referenced_;  // blobs this run already references
  std::deque<KnownBlob> recent_;
  std::deque<std::pair<uint64_t, std::shared_ptr<const std::vector<int32_t>>>> recent_prompts_;
};

}  // namespace

RunRow NewRunRow(const proto::RunHeader& header, int zstd_level) {
  RunRow row;
  row.run_id = header.run_id();
  row.start_time_ns = header.start_time_ns();
  SetHeaderColumns(header, zstd_level, &row);
  row.stored_bytes = static_cast<int64_t>(row.header.size());
  row.last_event_ns = header.start_time_ns();
  return row;
}

std::unique_ptr<RunWriter> NewRunWriter(std::unique_ptr<RowConn> conn, proto::RunHeader header,
                                        RunRow row, const WriterOptions& options) {
  return std::make_unique<RunWriterImpl>(std::move(conn), std::move(header), std::move(row),
                                         options);
}

}  // namespace trace::store
