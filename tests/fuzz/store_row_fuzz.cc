// Fuzz target: decoding stored event rows and blobs (store/codec.h), the code that reads
// whatever bytes a damaged or hostile store file holds. Must never crash, hang or
// allocate without bound; bad input is a Corruption status with a one-line message.
//
// Input layout: byte 0 picks the entry point (event row, blob, token columns), byte 1 the
// encoding, the rest is the row. The computed seeds are valid rows of every event kind in
// the writer's layout (packed token columns, prompt prefixes, blob references, raw and
// zstd), so they follow the format when it changes.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "store/codec.h"
#include "testkit/store_test_util.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace trace;
using namespace trace::store;

const std::string& BlobContent() {
  static const std::string kBlob(700, 'b');
  return kBlob;
}

// Blobs whose sha has a length divisible by 3 are missing; prompts of seq % 5 == 0 too.
Result<std::shared_ptr<const std::string>> FetchBlob(const std::string& sha) {
  if (sha.size() % 3 == 0) return Corruption("blob " + sha + " is missing");
  return std::make_shared<const std::string>(BlobContent());
}

Result<std::shared_ptr<const std::vector<int32_t>>> FetchPrompt(uint64_t seq) {
  if (seq % 5 == 0) return Corruption("no such prompt");
  return std::make_shared<const std::vector<int32_t>>(seq % 1000, 7);
}

// A valid stored row for `event`, in the layout of store.cc's writer.
std::string StoredRow(proto::Event event, uint64_t base_seq, int* encoding) {
  proto::StoredEvent stored;
  if (event.has_llm_call()) {
    auto* c = event.mutable_llm_call();
    if (!PackTokenColumns(*c, stored.mutable_tokens()).ok()) std::abort();
    proto::ClearSampledTokenArrays(c);
    auto* p = stored.mutable_prompt();
    p->set_base_seq(base_seq);
    p->set_prefix_len(base_seq % 1000 / 2);
    for (int i = 0; i < 5; ++i) p->add_suffix(i);
    c->clear_prompt_token_ids();
  }
  Status st = ForEachLargeField(
      &event, 256, [&](const std::vector<proto::FieldPathStep>& path, std::string* value) {
        auto* ref = stored.add_blobs();
        for (const auto& step : path) *ref->add_path() = step;
        ref->set_sha256("ab");  // FetchBlob serves any 2-character sha
        value->clear();
        return Status::Ok();
      });
  if (!st.ok()) std::abort();
  event.clear_seq();
  *stored.mutable_event() = std::move(event);
  return CompressIfSmaller(stored.SerializeAsString(), 3, encoding);
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  std::vector<std::string> seeds;
  int salt = 1;
  for (int kind = 10; kind <= 18; ++kind) {
    proto::Event e =
        store::testing::MakeFullEvent(static_cast<proto::Event::KindCase>(kind), salt++);
    int encoding;
    std::string row = StoredRow(e, 42, &encoding);
    // The decoder must accept what the writer's layout produces.
    auto back = DecodeEventRow(100, row, encoding, FetchBlob, FetchPrompt);
    if (!back.ok()) {
      std::fprintf(stderr, "seed of kind %d does not decode: %s\n", kind,
                   back.status().message().c_str());
      std::abort();
    }
    seeds.push_back(std::string(1, '\0') + static_cast<char>(encoding) + row);
    proto::TokenColumns cols;
    if (e.has_llm_call() && PackTokenColumns(e.llm_call(), &cols).ok()) {
      seeds.push_back(std::string(1, '\2') + '\1' + cols.SerializeAsString());
    }
  }
  int encoding;
  std::string blob =
      CompressWithPrefix(std::string(500, 'b') + "tail", BlobContent(), 3, &encoding);
  seeds.push_back(std::string(1, '\1') + static_cast<char>(encoding) + blob);
  return seeds;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // damaged UTF-8 is expected, not news
    return true;
  }();
  (void)quiet;
  if (size < 2) return 0;
  const int mode = data[0] % 3;
  const int encoding = data[1] % 4;  // includes one unknown encoding
  std::string_view row(reinterpret_cast<const char*>(data + 2), size - 2);
  switch (mode) {
    case 0: {
      auto e = DecodeEventRow(100, row, encoding, FetchBlob, FetchPrompt);
      if (!e.ok()) {
        trace::fuzz::RequireOneLine(e.status(), "DecodeEventRow");
        break;
      }
      // A decoded event must be internally consistent.
      if (e->has_llm_call()) {
        const auto& c = e->llm_call();
        if (c.logits_size() != c.token_ids_size()) trace::fuzz::Fail("logits != token ids");
      }
      std::string again = e->SerializeAsString();
      (void)again;
      break;
    }
    case 1: {
      auto d = Decompress(row, encoding, BlobContent());
      if (!d.ok()) trace::fuzz::RequireOneLine(d.status(), "Decompress");
      break;
    }
    case 2: {
      proto::TokenColumns cols;
      if (cols.ParseFromString(std::string(row))) {
        proto::LlmCall call;
        Status st = UnpackTokenColumns(cols, encoding * 3 - 1, &call);
        if (!st.ok()) {
          trace::fuzz::RequireOneLine(st, "UnpackTokenColumns");
        } else if (static_cast<uint32_t>(call.token_ids_size()) != cols.count()) {
          trace::fuzz::Fail("unpacked token count != columns count");
        }
      }
      break;
    }
  }
  return 0;
}
