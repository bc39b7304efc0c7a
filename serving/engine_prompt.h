// A request's prompt as the engine takes it (engine/engine.h TokenSpan): image spans' key tokens
// (unit/unit_key.h ImageKeyToken) become the model's image token with its flag, and the rows of the
// images a call computes come from the vision tower, run once per image per request and only for
// the images that reach the positions asked for. The node checked the images first
// (CheckPrefillInput / CheckGenerateInput). Thread-compatible.
#pragma once

#include <optional>
#include <vector>

#include "engine/engine.h"
#include "node_client/node_messages.h"
#include "util/status.h"

namespace ds41 {

class EnginePrompt {
 public:
  // `tokens` and `images` must outlive this object. REQUIRES: checked as above.
  EnginePrompt(const Engine& engine, const ModelConfig& config, const std::vector<int32_t>& tokens,
               const std::vector<PromptImage>& images);

  // Positions [0, end) with the embeddings of every image row from `from` on (end: the tokens' size
  // when negative). The tower runs here for the images not yet encoded that reach [from, end).
  StatusOr<TokenSpan> From(int64_t from, int64_t end = -1);

  int images_encoded() const { return encoded_; }

 private:
  const Engine& engine_;
  const ModelConfig& c_;
  const std::vector<int32_t>& tokens_;
  const std::vector<PromptImage>& images_;
  std::vector<std::optional<std::vector<float>>> rows_;  // per image: its span's embeddings, once encoded
  int encoded_ = 0;
};

}  // namespace ds41
