// Fuzz target: decoding stored event rows and blobs (store/codec.h), the code that reads
// whatever bytes a damaged or hostile store file holds. Must never crash, hang or
// allocate without bound; bad input is a Corruption status.
//
// Input layout: byte 0 picks the entry point, byte 1 the encoding, the rest is the row.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trace;
  using namespace trace::store;
  if (size < 2) return 0;
  const int mode = data[0] % 3;
  const int encoding = data[1] % 4;  // includes one unknown encoding
  std::string_view row(reinterpret_cast<const char*>(data + 2), size - 2);
  static const std::string kBlob(700, 'b');
  BlobFetcher blobs = [](const std::string& sha) -> Result<std::shared_ptr<const std::string>> {
    if (sha.size() % 3 == 0) return Corruption("blob " + sha + " is missing");
    return std::make_shared<const std::string>(kBlob);
  };
  PromptFetcher prompts = [](uint64_t seq) -> Result<std::shared_ptr<const std::vector<int32_t>>> {
    if (seq % 5 == 0) return Corruption("no such prompt");
    return std::make_shared<const std::vector<int32_t>>(seq % 1000, 7);
  };
  switch (mode) {
    case 0: {
      auto e = DecodeEventRow(100, row, encoding, blobs, prompts);
      if (e.ok()) {
        // A decoded event must be internally consistent.
        if (e->has_llm_call()) {
          const auto& c = e->llm_call();
          if (c.logits_size() != c.token_ids_size()) __builtin_trap();
        }
        std::string again = e->SerializeAsString();
        (void)again;
      }
      break;
    }
    case 1: {
      auto d = Decompress(row, encoding, kBlob);
      (void)d;
      break;
    }
    case 2: {
      proto::TokenColumns cols;
      if (cols.ParseFromString(std::string(row))) {
        proto::LlmCall call;
        Status st = UnpackTokenColumns(cols, encoding * 3 - 1, &call);
        if (st.ok() && static_cast<uint32_t>(call.token_ids_size()) != cols.count()) {
          __builtin_trap();
        }
      }
      break;
    }
  }
  return 0;
}
