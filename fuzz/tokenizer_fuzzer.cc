// Surface: the tokenizer file (tokenizer.json, read by every role at start-up from the model
// folder) and, through a loaded tokenizer, any text to encode (prompts are client text).
//
// Input: byte 0 bit 0 picks the mode. File mode: the rest is a tokenizer.json; when it loads, a
// few texts (fixed ones and the file's own first bytes) are encoded and decoded with it. Text
// mode: the rest is text for the tiny checkpoint's tokenizer (fuzz/data/tokenizer.json), encoded
// with and without control-token matching.
// Properties: no crash; loading fails only with a Status; every id Encode returns is assigned;
// Decode(Encode(text)) == text for every byte string (byte-level BPE loses nothing); without
// control matching no id is a control token; a StreamDecoder fed the ids one at a time, then
// flushed, gives the same text when it is valid UTF-8.
#include "fuzz/fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {

void CheckText(const ds41::Tokenizer& tok, std::string_view text) {
  for (const bool control : {false, true}) {
    const std::vector<int32_t> ids = tok.Encode(text, control);
    for (int32_t id : ids) {
      DS41_FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
      DS41_FUZZ_CHECK(!tok.TokenBytes(id).empty() || tok.IsControl(id));
      if (!control) DS41_FUZZ_CHECK(!tok.IsControl(id));
    }
    DS41_FUZZ_CHECK(tok.Decode(ids) == text);
    if (!control && ds41::fuzz::ValidUtf8(text)) {
      ds41::StreamDecoder dec(tok);
      std::string streamed;
      for (int32_t id : ids) streamed += dec.Feed(id);
      streamed += dec.Flush();
      DS41_FUZZ_CHECK(streamed == text);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    static const ds41::Tokenizer* tiny = [] {
      auto t = ds41::Tokenizer::Load(ds41::fuzz::DataPath("tokenizer.json"));
      DS41_FUZZ_CHECK(t.ok());
      return new ds41::Tokenizer(std::move(*t));  // kept for the process's life
    }();
    CheckText(*tiny, rest.substr(0, 4096));
    return 0;
  }
  auto tok = ds41::Tokenizer::FromJson(rest);
  if (!tok.ok()) return 0;
  CheckText(*tok, "Hello, world! 123 <｜User｜>héllo\n\t  x");
  CheckText(*tok, std::string_view("\xff\xfe\x00\xc3", 4));
  CheckText(*tok, rest.substr(0, 64));
  return 0;
}
