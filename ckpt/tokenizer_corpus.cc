#include "ckpt/tokenizer_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/control_tokens.h"
#include "tokenizer/bpe_trainer.h"

namespace ds41 {
namespace fs = std::filesystem;

namespace {

bool TextLike(const fs::path& p) {
  static const char* kExt[] = {".md", ".txt", ".cc", ".h", ".py", ".json", ".sh", ".proto", ".yaml", ""};
  const std::string ext = p.extension().string();
  return std::find_if(std::begin(kExt), std::end(kExt), [&](const char* e) { return ext == e; }) != std::end(kExt);
}

}  // namespace

StatusOr<std::vector<std::string>> ReadCorpus(const std::vector<std::string>& paths, size_t max_bytes) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec) && TextLike(it->path())) files.push_back(it->path());
      }
    } else if (fs::is_regular_file(p, ec)) {
      files.emplace_back(p);
    } else {
      return NotFoundError("corpus path " + p + " is neither a file nor a folder");
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  size_t total = 0;
  for (const fs::path& f : files) {
    if (total >= max_bytes) break;
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string t = ss.str().substr(0, max_bytes - total);
    total += t.size();
    if (!t.empty()) texts.push_back(std::move(t));
  }
  if (texts.empty()) return InvalidArgumentError("the tokenizer corpus is empty");
  return texts;
}

Status WriteTrainedTokenizer(const std::vector<std::string>& corpus, int32_t vocab_size, const std::string& out_dir) {
  // ids 0..2 (begin, end, pad) are the trainer's own; the rest follow in the chat format's order.
  std::vector<std::string> controls;
  const auto all = chat::ControlTokens();
  for (size_t i = 3; i < all.size(); ++i) controls.emplace_back(all[i]);
  DS41_ASSIGN_OR_RETURN(std::string json, TrainBpe(corpus, vocab_size, controls));
  std::ofstream out(out_dir + "/tokenizer.json", std::ios::binary);
  out << json;
  if (!out) return InternalError("cannot write " + out_dir + "/tokenizer.json");
  return Status::Ok();
}

int32_t TrainedControlTokenId(std::string_view control) {
  const auto all = chat::ControlTokens();  // ids 0..2 are the trainer's begin, end and pad: the same three
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == control) return static_cast<int32_t>(i);
  return -1;
}

}  // namespace ds41
