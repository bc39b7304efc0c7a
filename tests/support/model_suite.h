// ModelSuite: a GoogleTest fixture that opens one model for its whole suite (the suite's tests only
// read it) from the derived suite's static Checkpoint(), with the seeded prompts the engine's tests
// use. CRTP, so each suite holds a model of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/loading/model.h"

namespace ds41::testing {

template <typename Suite>
class ModelSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = Model::Open(Suite::Checkpoint());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  const ModelConfig& cfg() const { return model_->config(); }

  // n token ids in [3, 503), the same for the same seed.
  static std::vector<int32_t> Prompt(int n, int seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& v : t) v = 3 + static_cast<int32_t>(rng() % 500);
    return t;
  }

  static inline Model* model_ = nullptr;
};

}  // namespace ds41::testing
