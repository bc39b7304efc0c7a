// SequenceState: everything the engine keeps for one sequence between forward calls, in the cache
// byte formats of MODEL.md §10.3 (codes and scales, never floats): per-layer FP8 window rings,
// per-KV-source FP4 compressed KV and FP4 index keys with the open ratio-m group, the Engram
// n-gram history and the stream entering the first decoder layer for the last window positions
// (what CED decoder replay reads). It serializes to bytes and restores exactly.
//
// Thread-compatible: one forward call at a time per state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "util/status.h"

namespace ds41 {

// The FP8 window KV ring of one layer. Positions [first_valid(), end) are held, slot = pos % window.
struct WindowRing {
  int64_t end = 0;    // positions < end have passed through this layer
  int64_t floor = 0;  // positions < floor are absent (bounded replay start, MODEL.md §10.4)
  std::vector<uint8_t> slots;  // [window][window_entry_bytes]

  int64_t first_valid(int window) const { return end - window > floor ? end - window : floor; }
};

// Compressed KV of one KV-source layer: ratio-m groups of positions -> one entry each.
struct KvSourceCache {
  int64_t processed = 0;            // positions that went through the compressor
  std::vector<uint8_t> main_kv;     // [entries][main_kv_bytes], FP4 + E4M3 scales
  std::vector<uint8_t> index_keys;  // [entries][index_key_bytes], FP4 + E8M0 scales
  std::vector<float> pending_kv;    // [ratio - 1][head_dim] fp32: the open group's tokens
  std::vector<float> pending_gate;  // [ratio - 1][head_dim] fp32 (empty at ratio 1)

  int64_t entries(int ratio) const { return processed / ratio; }
  int pending(int ratio) const { return static_cast<int>(processed % ratio); }
};

// The stream entering the first decoder layer (output of the last encoder layer and its FFN pre
// mix) for the last `window` positions: the decoder-replay input of CED (MODEL.md §10.6).
struct StreamRing {
  int64_t end = 0;
  int64_t floor = 0;
  std::vector<uint16_t> x;  // [window][hc * dim] bf16 bits
  std::vector<float> pre;   // [window][hc]
};

struct SequenceState {
  int64_t length = 0;                  // tokens consumed (positions [0, length))
  std::vector<WindowRing> rings;       // [n_layers]
  std::vector<KvSourceCache> kv;       // [kv sources]
  std::vector<int64_t> engram_history; // [max_ngram - 1] compressed ids of length-1, length-2, ...
  StreamRing encoder_out;

  // A fresh state for `config` (no tokens).
  static SequenceState Create(const ModelConfig& config);

  // Bytes held (what memory budgets count).
  size_t ByteSize() const;

  // Binary encoding with a header (magic, version, config fingerprint). Deserialize checks every
  // size against `config` and returns InvalidArgument/DataLoss for anything else.
  std::string Serialize(const ModelConfig& config) const;
  static StatusOr<SequenceState> Deserialize(const std::string& bytes, const ModelConfig& config);

  // The SWA state at the current position (SERVING.md §4): the window rings of layers 0..ced_split,
  // the open compressor groups, the Engram history and the encoder stream ring. Small, short-lived,
  // what nodes pool and pull; the global KV travels as cache units instead.
  std::string SerializeSwa(const ModelConfig& config) const;
  // Replaces this state's SWA part. REQUIRES: the global KV reaches the SWA state's position
  // (FailedPrecondition otherwise); damaged bytes are DataLoss.
  Status RestoreSwa(const std::string& bytes, const ModelConfig& config);
  // Position of a serialized SWA state (DataLoss when the bytes are not one).
  static StatusOr<int64_t> SwaPosition(const std::string& bytes, const ModelConfig& config);
};

// What one pass appending rows [start, start + rows) to a state changed, kept so that the state can
// be cut back to any length in [start, start + rows] exactly as if only those first rows had run:
// what speculative verification needs after a rejection (Engine::VerifyBatch, MODEL.md §9.3).
//
// Why a record and not a copy of the state or a re-run of the kept rows: a pass of a few rows
// appends compressed KV and index keys (cut back by truncation), overwrites one slot per row in
// each window ring and in the encoder stream ring (the old slots are saved: rows x 528 B a layer),
// rewrites the open compressor groups (the old ones are saved, and the pass logs the open-group
// rows it computes, since it zeroes a group when it closes) and advances the Engram history (saved
// per row). All of it is a few kilobytes a row, against a whole state copy or a second forward pass.
struct StateUndo {
  int64_t start = 0;
  int rows = 0;
  std::vector<std::vector<uint8_t>> ring_slots;  // [layers][rows][window_entry_bytes]: slots before the pass
  std::vector<uint16_t> stream_x;                // [rows][hc * dim]: encoder stream ring slots before the pass
  std::vector<float> stream_pre;                 // [rows][hc]
  struct Compressor {
    std::vector<float> pending_kv, pending_gate;  // the open group before the pass
    std::vector<float> row_kv, row_gate;          // [rows][head_dim]: what the pass computed per row (ratio > 1)
  };
  std::vector<Compressor> kv;                     // [kv sources]
  // The Engram history after i rows, as the pass logs it: [rows + 1] with Engram layers, else [1].
  std::vector<std::vector<int64_t>> history;
};

// Starts `undo` for a pass of `rows` rows appended at state.length; the pass must carry it
// (Segment::undo) so that its compressors and its Engram rows log what they compute.
// REQUIRES: every window ring and every compressor at state.length; rows <= window.
void BeginUndo(const ModelConfig& config, const SequenceState& state, int rows, StateUndo* undo);

// Cuts `state` back to `length` after the pass `undo` recorded. InvalidArgument when the state is not
// where the pass left it or `length` is outside [undo.start, undo.start + undo.rows].
Status RollBack(const ModelConfig& config, const StateUndo& undo, int64_t length, SequenceState* state);

// A 64-bit digest of the configuration's shape, stamped into serialized state.
uint64_t ConfigFingerprint(const ModelConfig& config);

}  // namespace ds41
