// Test fixtures: small checkpoints written by the project's own tool into per-process temporary
// folders (never fixed paths, so ctest -j is safe). Thread-safe: a lock guards the list of folders
// removed at exit, and the shared checkpoints are function-local statics.
#pragma once

#include <cstdint>
#include <string>

#include "engine/config/config.h"

namespace ds41::testing {

// A fresh temporary folder under $TMPDIR (or /tmp), removed at process exit.
std::string TempDir(const std::string& tag);

// Writes `config` with `seed` into a new temporary folder and returns its path.
std::string WriteTestCheckpoint(const ModelConfig& config, uint64_t seed, const std::string& tag);

// The tiny config of MODEL.md §12, written once per process.
const std::string& TinyCheckpoint();

// The small preset (release window, top-k and candidate pool) with a BPE tokenizer trained on a
// generated corpus: what the router and the local cluster serve. Written once per process.
const std::string& SmallServingCheckpoint();

}  // namespace ds41::testing
