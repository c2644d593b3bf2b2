// The recognizer behind a Matcher (internal to the grammar layer).
//
// Model: a parse is a stack of grammar positions (the top is a code-point set to match next, the
// frames below are where to continue when the rule above ends), as in llama.cpp. Stacks are
// persistent linked lists of interned nodes (pos, parent), so equal stacks are equal ids and a
// push never copies. A configuration ("config") is the set of stacks alive after some input (all
// parses of an ambiguous grammar at once; the empty stack kAccept means the start rule finished)
// plus the bytes of a UTF-8 character begun but not finished; configs are interned too. Stepping
// a config by a byte is cached in a 256-entry row per config, which turns the recognizer into a
// lazily built byte automaton: the mask walk over the token trie (matcher.cpp) then costs one
// table read per trie node once the rows it needs exist.
//
// After a code point matches a top, the parse advances past it: the closure follows rule ends
// (pop) and rule references (push each alternative; a reference in tail position pushes no return
// frame, so right recursion such as x* runs in constant depth) until every stack again has a
// code-point set on top. Closures are cached per stack node. Compile-time refusal of left
// recursion guarantees closures end; the run-time limits (Limits: max_stacks, max_stack_depth,
// max_closure_steps) bound each step, and a step over a limit yields an error code, never a
// partial result.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace ggflow::grammar::detail {

// Step results below zero.
enum : int32_t {
  kDead = -1,         // no parse continues with this byte
  kUnknown = -2,      // (cache) not computed yet
  kAmbiguous = -3,    // more than Limits::max_stacks parses
  kTooDeep = -4,      // a parse nested deeper than Limits::max_stack_depth
  kTooMuchWork = -5,  // a closure took more than Limits::max_closure_steps
};

class Engine {
 public:
  explicit Engine(const Grammar& g);

  // The config before any input (negative: an error code).
  int32_t start();
  // The config after `byte`, or a negative code.
  int32_t step(int32_t cfg, uint8_t byte) {
    const int32_t row = row_of_[cfg];
    if (row >= 0) {
      const int32_t t = rows_[static_cast<size_t>(row) * 256 + byte];
      if (t != kUnknown) return t;
    }
    return step_slow(cfg, byte);
  }
  // The grammar may end here (a parse finished and no character is half read).
  bool accepting(int32_t cfg) const { return configs_[cfg].accept; }

  // The cached rows, for the mask walk's inner loop (matcher.cpp): step(cfg, b) is
  // rows[row_of[cfg] * 256 + b] when row_of[cfg] >= 0 and that entry is not kUnknown, else
  // step_slow(cfg, b), after which both pointers must be read again.
  // Rows beyond Limits::max_step_rows are dropped all at once; row_epoch() counts those resets
  // (row indices read before one are stale).
  const int32_t* row_of() const { return row_of_.data(); }
  const int32_t* rows() const { return rows_.data(); }
  uint64_t row_epoch() const { return row_epoch_; }
  int32_t step_slow(int32_t cfg, uint8_t byte);
  // The config most ASCII characters step `cfg` to (`next`, negative when none lives), the set of
  // those characters, and whether every non-ASCII character steps there too: the mask walk
  // allows a whole trie subtree when, character by character, everything below falls in it.
  // Computed on first use, which may step and so grow the rows.
  struct Major {
    std::array<uint64_t, 2> bytes;
    int32_t next;
    bool non_ascii;
  };
  const Major& ascii_major(int32_t cfg);

  // A canonical form of a config, independent of ids: equal for equal parse states in any engine
  // of the same grammar. Layout: [n_partial, total, uniform, partial bytes..., n_stacks, then per
  // stack its length and positions top to bottom], stacks in lexicographic order.
  void signature(int32_t cfg, std::vector<uint32_t>* out) const;
  // The config of a signature from an engine of the same grammar (negative: malformed or over a limit).
  int32_t from_signature(std::span<const uint32_t> sig);

  // What the parses expect next, as GBNF ("[0-9]", "\"}\"", "end of text"), for error messages.
  std::string expected(int32_t cfg, size_t max_items = 6) const;
  // A step result as words ("no parse continues", "... more than Limits::max_stacks = 256 ...").
  std::string reason(int32_t code) const;

  uint64_t work() const { return work_; }  // closure steps + stack advances so far
  size_t memory_bytes() const;

 private:
  struct Node {
    uint32_t pos, parent, depth;
  };
  struct Config {
    uint32_t off, n;       // stack ids in config_pool_ [off, off + n), ascending
    uint8_t partial[3];    // bytes of an unfinished UTF-8 character
    uint8_t n_partial, total;  // bytes read of a character of `total` bytes (0 0: none)
    bool uniform;              // every stack matches whatever the character becomes (bytes zeroed)
    bool accept;
  };
  static constexpr uint32_t kBottom = 0;  // the parent of the outermost frame
  static constexpr uint32_t kAccept = 1;  // the empty stack: the start rule has finished

  int32_t ensure_row(int32_t cfg);  // cfg's row in rows_, allocated on first use
  void fill_ascii_row(int32_t cfg);
  int32_t compute_step(int32_t cfg, uint8_t byte);
  int32_t step_stacks(const Config& c, uint32_t cp, bool all);
  int64_t intern_node(uint32_t pos, uint32_t parent);  // id, or kTooDeep
  int32_t intern_config(const std::vector<uint32_t>& stacks, const uint8_t* partial, uint8_t n_partial, uint8_t total, bool uniform);
  int32_t advance(uint32_t node);                     // offset in adv_pool_, or an error code
  int32_t closure(std::vector<uint32_t>* out);        // expands seeds_ into stacks; 0 or an error code
  const CodepointSet& top_set(uint32_t node) const { return g_.sets()[g_.elements()[nodes_[node].pos].arg]; }

  const Grammar& g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;  // (pos << 32 | parent) -> id
  std::vector<int32_t> adv_off_;                     // per node: -1 not yet, < -1 error, else offset
  std::vector<uint32_t> adv_pool_;                   // [count, ids...] per advanced node
  std::vector<Config> configs_;
  std::vector<uint32_t> config_pool_;
  std::unordered_map<std::string, int32_t> config_ids_;
  std::vector<int32_t> row_of_;                      // per config: row in rows_, or -1
  std::vector<int32_t> rows_;                        // 256 step results per row
  uint64_t row_epoch_ = 0;
  std::vector<Major> majors_;                        // per config: ascii_major, once computed
  std::vector<uint8_t> major_known_;
  uint64_t work_ = 0;
  // Scratch of closure(): pending (pos, parent) pairs and a visited set stamped by generation.
  std::vector<std::pair<uint32_t, uint32_t>> seeds_;
  std::vector<std::pair<uint64_t, uint32_t>> visited_;
  uint32_t visit_gen_ = 0;
  size_t visit_count_ = 0;
  std::vector<uint32_t> scratch_;
  bool visit(uint64_t key);
};

}  // namespace ggflow::grammar::detail
