#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/test_corpus.h"
#include "tokenizer/tokenizer.h"

namespace ds41 {
namespace {

TEST(BpeTrainerTest, DeterministicAcrossRunsAndCorpusOrder) {
  std::vector<std::string> corpus = tokenizer::TestCorpus();
  StatusOr<std::string> a = TrainBpe(corpus, 600, {});
  StatusOr<std::string> b = TrainBpe(corpus, 600, {});
  std::reverse(corpus.begin(), corpus.end());
  StatusOr<std::string> c = TrainBpe(corpus, 600, {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
}

TEST(BpeTrainerTest, IdLayoutAndMergeOrder) {
  const std::vector<std::string> controls = {"<｜User｜>", "<｜Assistant｜>"};
  StatusOr<std::string> json = TrainBpe(tokenizer::TestCorpus(), 500, controls);
  ASSERT_TRUE(json.ok());
  const nlohmann::json j = nlohmann::json::parse(*json);
  const auto& vocab = j["model"]["vocab"];
  EXPECT_EQ(vocab.size(), 500u);
  EXPECT_EQ(vocab[std::string(kBosToken)], 0);
  EXPECT_EQ(vocab[std::string(kEosToken)], 1);
  EXPECT_EQ(vocab[std::string(kPadToken)], 2);
  EXPECT_EQ(vocab["<｜User｜>"], 3);
  EXPECT_EQ(vocab["<｜Assistant｜>"], 4);
  EXPECT_EQ(vocab["Ā"], 5);  // byte 0x00
  EXPECT_EQ(j["added_tokens"].size(), 5u);
  // Merge i produces id 261 + i.
  const auto& merges = j["model"]["merges"];
  ASSERT_EQ(merges.size(), 500u - 261u);
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string merged = merges[i][0].get<std::string>() + merges[i][1].get<std::string>();
    ASSERT_EQ(vocab[merged], 261 + static_cast<int>(i)) << merged;
  }
}

TEST(BpeTrainerTest, TrainingTextReencodesLosslessly) {
  const std::vector<std::string> corpus = tokenizer::TestCorpus();
  StatusOr<std::string> json = TrainBpe(corpus, 1000, {});
  ASSERT_TRUE(json.ok());
  StatusOr<Tokenizer> tok = Tokenizer::FromJson(*json);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  size_t total_ids = 0, total_bytes = 0;
  for (const std::string& text : corpus) {
    const std::vector<int32_t> ids = tok->Encode(text, false);
    ASSERT_EQ(tok->Decode(ids), text);
    total_ids += ids.size();
    total_bytes += text.size();
  }
  EXPECT_LT(total_ids * 3, total_bytes);  // merges were actually learned and used
}

TEST(BpeTrainerTest, StopsEarlyWhenNothingLeftToMerge) {
  StatusOr<std::string> json = TrainBpe(std::vector<std::string>{"ab ab"}, 4000, {});
  ASSERT_TRUE(json.ok());
  StatusOr<Tokenizer> tok = Tokenizer::FromJson(*json);
  ASSERT_TRUE(tok.ok());
  EXPECT_LT(tok->vocab_size(), 4000);
  EXPECT_EQ(tok->Encode("ab ab", false).size(), 2u);
}

TEST(BpeTrainerTest, RejectsBadArguments) {
  const std::vector<std::string> corpus = {"x"};
  EXPECT_FALSE(TrainBpe(corpus, 258, {}).ok());
  EXPECT_FALSE(TrainBpe(corpus, 600, std::vector<std::string>{""}).ok());
  EXPECT_FALSE(TrainBpe(corpus, 600, std::vector<std::string>{"<a>", "<a>"}).ok());
  EXPECT_FALSE(TrainBpe(corpus, 600, std::vector<std::string>{std::string(kEosToken)}).ok());
  EXPECT_FALSE(TrainBpe(corpus, 600, std::vector<std::string>{"!"}).ok());
}

}  // namespace
}  // namespace ds41
