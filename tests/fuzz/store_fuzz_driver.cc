// Driver for store_row_fuzz under g++ (no libFuzzer): builds a seed corpus of valid rows
// (every event kind, packed token columns, prompt prefixes, blob references, raw and zstd
// encodings), checks that every seed decodes, then feeds random mutations of the seeds
// to LLVMFuzzerTestOneInput for the given number of seconds. Deterministic per --seed.
// Usage: store_row_fuzz [SECONDS] [SEED]. Exit 1 when a valid seed fails to decode.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "store/codec.h"
#include "tests/store/store_test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using namespace trace;
using namespace trace::store;

int Feed(const std::string& s) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// A valid stored row for `event`, in the layout of run_writer.cc.
std::string StoredRow(proto::Event event, uint64_t base_seq, int* encoding) {
  proto::StoredEvent stored;
  if (event.has_llm_call()) {
    auto* c = event.mutable_llm_call();
    if (!PackTokenColumns(*c, stored.mutable_tokens()).ok()) std::abort();
    c->clear_token_ids();
    c->clear_logits_digests();
    c->clear_logits();
    c->clear_logprobs();
    c->clear_runner_up_ids();
    c->clear_runner_up_logits();
    c->clear_layer_digests();
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
        ref->set_sha256("ab");  // the target's fetcher serves any 2-char sha
        value->clear();
        return Status::Ok();
      });
  if (!st.ok()) std::abort();
  event.clear_seq();
  *stored.mutable_event() = std::move(event);
  return CompressIfSmaller(stored.SerializeAsString(), 3, encoding);
}

}  // namespace

int main(int argc, char** argv) {
  google::protobuf::SetLogHandler(nullptr);  // damaged UTF-8 is expected, not news
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::vector<std::string> corpus;
  int salt = 1;
  for (int kind = 10; kind <= 18; ++kind) {
    proto::Event e =
        store::testing::MakeFullEvent(static_cast<proto::Event::KindCase>(kind), salt++);
    int encoding;
    std::string row = StoredRow(e, 42, &encoding);
    // The decoder must accept what the writer's layout produces.
    auto back = DecodeEventRow(
        100, row, encoding,
        [](const std::string&) -> Result<std::shared_ptr<const std::string>> {
          return std::make_shared<const std::string>(700, 'b');
        },
        [](uint64_t s) -> Result<std::shared_ptr<const std::vector<int32_t>>> {
          return std::make_shared<const std::vector<int32_t>>(s % 1000, 7);
        });
    if (!back.ok()) {
      std::fprintf(stderr, "seed of kind %d does not decode: %s\n", kind,
                   back.status().message().c_str());
      return 1;
    }
    corpus.push_back(std::string(1, '\0') + static_cast<char>(encoding) + row);
    proto::TokenColumns cols;
    if (e.has_llm_call() && PackTokenColumns(e.llm_call(), &cols).ok()) {
      corpus.push_back(std::string(1, '\2') + '\1' + cols.SerializeAsString());
    }
  }
  int enc;
  std::string blob =
      CompressWithPrefix(std::string(500, 'b') + "tail", std::string(700, 'b'), 3, &enc);
  corpus.push_back(std::string(1, '\1') + static_cast<char>(enc) + blob);
  for (const auto& c : corpus) Feed(c);

  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int batch = 0; batch < 64; ++batch, ++runs) {
      std::string s = corpus[rng() % corpus.size()];
      const int edits = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < edits && s.size() > 2; ++k) {
        size_t pos = 2 + rng() % (s.size() - 2);
        switch (rng() % 6) {
          case 0:
            s[pos] = static_cast<char>(rng());
            break;
          case 1:
            s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
            break;
          case 2:
            s.erase(pos, 1 + rng() % std::min<size_t>(32, s.size() - pos));
            break;
          case 3:
            s.insert(pos, std::string(1 + rng() % 8, static_cast<char>(rng())));
            break;
          case 4:
            s.resize(pos);
            break;
          case 5: {  // splice from another seed
            const std::string& o = corpus[rng() % corpus.size()];
            size_t from = rng() % o.size();
            s.insert(pos, o.substr(from, 1 + rng() % 64));
            break;
          }
        }
      }
      if (rng() % 8 == 0) s[0] = static_cast<char>(rng() % 3);
      if (rng() % 8 == 0) s[1] = static_cast<char>(rng() % 4);
      Feed(s);
    }
  }
  std::printf("store_row_fuzz: %zu seeds, %llu mutated inputs, no crash\n", corpus.size(),
              static_cast<unsigned long long>(runs));
  return 0;
}
