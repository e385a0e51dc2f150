#include "store/run_reader.h"

#include "base/hash.h"
#include "store/checksum.h"
#include "store/codec.h"

namespace trace::store {
namespace {

std::string Range(uint64_t from, uint64_t to) {
  return from == to ? std::to_string(from) : std::to_string(from) + ".." + std::to_string(to);
}

class EventIteratorImpl final : public EventIterator {
 public:
  EventIteratorImpl(std::unique_ptr<Db> db, std::string run_id, uint64_t from_seq, bool checksums,
                    uint64_t expected, bool ended)
      : db_(std::move(db)),
        decoder_(db_.get(), run_id, checksums),
        run_id_(std::move(run_id)),
        next_seq_(std::max<uint64_t>(from_seq, 1)),
        expected_(expected),
        ended_(ended) {}

  Status Prepare(uint64_t from_seq, bool checksums) {
    TRACE_ASSIGN_OR_RETURN(
        stmt_, db_->Prepare(checksums ? "SELECT seq, kind, wall_time_ns, encoding, payload, "
                                        "checksum FROM events WHERE run_id=? AND seq>=? "
                                        "ORDER BY seq"
                                      : "SELECT seq, kind, wall_time_ns, encoding, payload, "
                                        "NULL FROM events WHERE run_id=? AND seq>=? "
                                        "ORDER BY seq"));
    stmt_.Bind(1, run_id_).Bind(2, static_cast<int64_t>(from_seq));
    return Status::Ok();
  }

  bool Next(EventRecord* record) override {
    if (!status_.ok() || done_) return false;
    if (!have_row_) {
      auto row = db_->Step(stmt_);
      if (!row.ok()) {
        status_ = row.status();
        return false;
      }
      if (!*row) {
        done_ = true;
        // Rows missing at the end: the summary counts more events than there are.
        if (next_seq_ <= expected_) {
          return Fail(record, next_seq_,
                      "events " + Range(next_seq_, expected_) + " are missing (the run counts " +
                          std::to_string(expected_) + " events); run `trace fsck`");
        }
        return false;
      }
      have_row_ = true;
    }
    const uint64_t seq = static_cast<uint64_t>(stmt_.Int(0));
    if (seq > next_seq_) {
      // Rows missing in the middle: report the gap, then the row we hold.
      uint64_t from = next_seq_;
      next_seq_ = seq;
      return Fail(record, from,
                  "events " + Range(from, seq - 1) + " are missing; run `trace fsck`");
    }
    have_row_ = false;
    next_seq_ = seq + 1;
    record->seq = seq;
    std::string payload(stmt_.Blob(4));
    record->stored_bytes = payload.size();
    auto e = decoder_.CheckAndDecode(seq, stmt_.Int(1), stmt_.Int(2),
                                     static_cast<int>(stmt_.Int(3)), payload, stmt_, 5);
    if (!e.ok()) return Fail(record, seq, e.status());
    if (seq > expected_) {
      return Fail(record, seq,
                  "is beyond the " + std::to_string(expected_) +
                      " events the run counts (damaged summary); run `trace fsck`");
    }
    const bool last = seq == expected_;
    if (e->has_run_end() && !last) {
      return Fail(record, seq,
                  "a RunEnd before the run's last event (" + std::to_string(expected_) + ")");
    }
    if (last && ended_ && !e->has_run_end()) {
      return Fail(record, seq, "the run's last event should be its RunEnd but is not");
    }
    record->status = Status::Ok();
    record->event = std::move(*e);
    return true;
  }

  Status status() const override { return status_; }

 private:
  bool Fail(EventRecord* record, uint64_t seq, const std::string& what) {
    record->seq = seq;
    record->stored_bytes = 0;
    record->event.Clear();
    record->status = Corruption("run " + run_id_ + " seq " + std::to_string(seq) + ": " + what +
                                " in " + db_->path());
    return true;
  }
  bool Fail(EventRecord* record, uint64_t seq, const Status& st) {
    record->seq = seq;
    record->stored_bytes = 0;
    record->event.Clear();
    record->status = st;
    return true;
  }

  std::unique_ptr<Db> db_;
  RowDecoder decoder_;
  std::string run_id_;
  Stmt stmt_;
  Status status_;
  uint64_t next_seq_;
  uint64_t expected_;
  bool ended_;
  bool have_row_ = false;
  bool done_ = false;
};

}  // namespace

Result<std::shared_ptr<const std::string>> RowDecoder::Blob(const std::string& sha, int depth) {
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

Result<std::shared_ptr<const std::vector<int32_t>>> RowDecoder::Prompt(uint64_t seq) {
  if (auto it = prompt_cache_.find(seq); it != prompt_cache_.end()) return it->second;
  TRACE_ASSIGN_OR_RETURN(proto::Event e, Event(seq));
  if (!e.has_llm_call()) {
    return Corruption("seq " + std::to_string(seq) + " is not an LlmCall");
  }
  // Decode() cached it.
  return prompt_cache_.at(seq);
}

Result<proto::Event> RowDecoder::Event(uint64_t seq) {
  if (!event_stmt_.get()) {
    TRACE_ASSIGN_OR_RETURN(
        event_stmt_,
        db_->Prepare(checksums_ ? "SELECT kind, wall_time_ns, encoding, payload, checksum "
                                  "FROM events WHERE run_id=? AND seq=?"
                                : "SELECT kind, wall_time_ns, encoding, payload, NULL "
                                  "FROM events WHERE run_id=? AND seq=?"));
  }
  event_stmt_.Reset().Bind(1, run_id_).Bind(2, static_cast<int64_t>(seq));
  TRACE_ASSIGN_OR_RETURN(bool row, db_->Step(event_stmt_));
  if (!row) return NotFound("run " + run_id_ + " has no event with seq " + std::to_string(seq));
  std::string payload(event_stmt_.Blob(3));
  auto e = CheckAndDecode(seq, event_stmt_.Int(0), event_stmt_.Int(1),
                          static_cast<int>(event_stmt_.Int(2)), payload, event_stmt_, 4);
  event_stmt_.Reset();
  return e;
}

Result<proto::Event> RowDecoder::CheckAndDecode(uint64_t seq, int64_t kind, int64_t wall_time_ns,
                                                int encoding, std::string_view payload,
                                                const Stmt& row, int checksum_column) {
  if (checksums_) {
    const uint64_t computed =
        EventRowChecksum(run_id_, static_cast<int64_t>(seq), kind, wall_time_ns, encoding, payload);
    if (!row.IsInt(checksum_column) || ChecksumFromSql(row.Int(checksum_column)) != computed) {
      return Corruption("run " + run_id_ + " seq " + std::to_string(seq) +
                        ": row checksum mismatch (the row was changed after it was written) in " +
                        db_->path());
    }
  }
  TRACE_ASSIGN_OR_RETURN(proto::Event e, Decode(seq, payload, encoding));
  if (static_cast<int64_t>(e.kind_case()) != kind) {
    return Corruption("run " + run_id_ + " seq " + std::to_string(seq) + ": kind column " +
                      std::to_string(kind) + " does not match the payload's kind");
  }
  if (e.wall_time_ns() != wall_time_ns) {
    return Corruption("run " + run_id_ + " seq " + std::to_string(seq) +
                      ": wall_time_ns column does not match the payload");
  }
  return e;
}

Result<proto::Event> RowDecoder::Decode(uint64_t seq, std::string_view payload, int encoding) {
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

void RowDecoder::Remember(const std::string& sha, std::shared_ptr<const std::string> content) {
  cached_bytes_ += content->size();
  if (cached_bytes_ > (size_t{256} << 20)) {
    blob_cache_.clear();
    cached_bytes_ = content->size();
  }
  blob_cache_[sha] = std::move(content);
}

Result<std::unique_ptr<EventIterator>> ReadRunEvents(std::unique_ptr<Db> db,
                                                     const std::string& run_id, uint64_t from_seq,
                                                     bool checksums) {
  // One read transaction for the count and the rows.
  TRACE_RETURN_IF_ERROR(db->Exec("BEGIN"));
  TRACE_ASSIGN_OR_RETURN(Stmt q,
                         db->Prepare("SELECT events, end_time_ns FROM runs WHERE run_id=?"));
  q.Bind(1, run_id);
  TRACE_ASSIGN_OR_RETURN(bool row, db->Step(q));
  if (!row) return NotFound("no run matches '" + run_id + "' in " + db->path());
  const int64_t expected = q.Int(0);
  const bool ended = !q.IsNull(1);
  q = Stmt();
  auto it = std::make_unique<EventIteratorImpl>(
      std::move(db), run_id, from_seq, checksums,
      static_cast<uint64_t>(std::max<int64_t>(0, expected)), ended);
  TRACE_RETURN_IF_ERROR(it->Prepare(from_seq, checksums));
  return std::unique_ptr<EventIterator>(std::move(it));
}

}  // namespace trace::store
