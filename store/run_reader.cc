#include "store/run_reader.h"

#include "base/escape.h"
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
  EventIteratorImpl(std::unique_ptr<RowConn> conn, std::string run_id, uint64_t from_seq,
                    uint64_t expected, bool ended)
      : conn_(std::move(conn)),
        decoder_(conn_.get(), run_id),
        run_id_(std::move(run_id)),
        next_seq_(std::max<uint64_t>(from_seq, 1)),
        expected_(expected),
        ended_(ended) {}

  Status Prepare(uint64_t from_seq) {
    TRACE_ASSIGN_OR_RETURN(cursor_, conn_->ScanEvents(run_id_, static_cast<int64_t>(from_seq)));
    return Status::Ok();
  }

  bool Next(EventRecord* record) override {
    if (!status_.ok() || done_) return false;
    if (!have_row_) {
      auto row = cursor_->Next(&row_);
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
    const uint64_t seq = static_cast<uint64_t>(row_.seq);
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
    record->stored_bytes = row_.payload.size();
    auto e = decoder_.CheckAndDecode(row_);
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
                                " in " + conn_->name());
    return true;
  }
  bool Fail(EventRecord* record, uint64_t seq, const Status& st) {
    record->seq = seq;
    record->stored_bytes = 0;
    record->event.Clear();
    record->status = st;
    return true;
  }

  std::unique_ptr<RowConn> conn_;
  RowDecoder decoder_;
  std::string run_id_;
  std::unique_ptr<EventCursor> cursor_;  // borrows conn_
  EventRow row_;
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
  // A SHA-256 read from a damaged row may hold any bytes: escaped in messages (base/escape.h).
  const auto blob = [&sha] { return "blob " + EscapeForDisplay(sha); };
  if (depth > kMaxBlobDepth) return Corruption(blob() + ": dependency chain too deep");
  TRACE_ASSIGN_OR_RETURN(std::optional<BlobRow> row, conn_->ReadBlob(sha));
  if (!row) return Corruption(blob() + " is missing");
  const int64_t size = row->size;
  const std::string& base_sha = row->base_sha256;
  const int64_t prefix_len = row->prefix_len;
  const std::string& dict_sha = row->dict_sha256;
  const int encoding = static_cast<int>(row->encoding);
  const std::string& data = row->data;
  if (base_sha == sha || dict_sha == sha) return Corruption(blob() + " depends on itself");
  std::shared_ptr<const std::string> base, dict;
  if (!base_sha.empty()) {
    TRACE_ASSIGN_OR_RETURN(base, Blob(base_sha, depth + 1));
  }
  if (!dict_sha.empty()) {
    TRACE_ASSIGN_OR_RETURN(dict, Blob(dict_sha, depth + 1));
  }
  if (encoding == kEncodingZstdPrefix && !dict) {
    return Corruption(blob() + ": prefix-compressed without a dictionary blob");
  }
  auto suffix = Decompress(data, encoding, dict ? std::string_view(*dict) : std::string_view());
  if (!suffix.ok()) return Corruption(blob() + ": " + suffix.status().message());
  auto content = std::make_shared<std::string>();
  if (base) {
    if (prefix_len < 0 || static_cast<size_t>(prefix_len) > base->size()) {
      return Corruption(blob() + ": prefix longer than its base");
    }
    content->assign(*base, 0, static_cast<size_t>(prefix_len));
  } else if (prefix_len != 0) {
    return Corruption(blob() + ": prefix without a base");
  }
  content->append(*suffix);
  if (static_cast<int64_t>(content->size()) != size || Sha256Hex(*content) != sha) {
    return Corruption(blob() + ": content does not match its SHA-256");
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
  TRACE_ASSIGN_OR_RETURN(std::optional<EventRow> row,
                         conn_->ReadEvent(run_id_, static_cast<int64_t>(seq)));
  if (!row) return NotFound("run " + run_id_ + " has no event with seq " + std::to_string(seq));
  return CheckAndDecode(*row);
}

Result<proto::Event> RowDecoder::CheckAndDecode(const EventRow& row) {
  const uint64_t seq = static_cast<uint64_t>(row.seq);
  const int64_t kind = row.kind;
  if (checksums_) {
    const uint64_t computed =
        EventRowChecksum(run_id_, row.seq, row.kind, row.wall_time_ns, row.encoding, row.payload);
    if (row.checksum != computed) {
      return Corruption("run " + run_id_ + " seq " + std::to_string(seq) +
                        ": row checksum mismatch (the row was changed after it was written) in " +
                        conn_->name());
    }
  }
  TRACE_ASSIGN_OR_RETURN(proto::Event e, Decode(seq, row.payload, static_cast<int>(row.encoding)));
  if (static_cast<int64_t>(e.kind_case()) != kind) {
    return Corruption("run " + run_id_ + " seq " + std::to_string(seq) + ": kind column " +
                      std::to_string(kind) + " does not match the payload's kind");
  }
  if (e.wall_time_ns() != row.wall_time_ns) {
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

Result<std::unique_ptr<EventIterator>> ReadRunEvents(std::unique_ptr<RowConn> conn,
                                                     const std::string& run_id, uint64_t from_seq) {
  // One read transaction for the count and the rows.
  TRACE_RETURN_IF_ERROR(conn->BeginRead());
  TRACE_ASSIGN_OR_RETURN(std::optional<StoredRunRow> run, conn->ReadRun(run_id));
  if (!run) return NotFound("no run matches '" + EscapeForDisplay(run_id) + "' in " + conn->name());
  const int64_t expected = run->row.events;
  const bool ended = run->row.ended;
  auto it = std::make_unique<EventIteratorImpl>(
      std::move(conn), run_id, from_seq, static_cast<uint64_t>(std::max<int64_t>(0, expected)),
      ended);
  TRACE_RETURN_IF_ERROR(it->Prepare(from_seq));
  return std::unique_ptr<EventIterator>(std::move(it));
}

}  // namespace trace::store
