// Drafters propose, the verifier scores, acceptance policies decide (vLLM's split).
//
// A draft tree holds candidate continuations of the committed tokens. Node 0..n-1, parents
// before children; parent -1 = child of the last committed token (the root).
//
//     root ── a ── b ── c          nodes: 0:a(-1) 1:b(0) 2:c(1) 3:x(0) 4:y(3)
//              └── x ── y
//
//     editspec::draft_tree tree;
//     lookup.propose(history, tree, /*budget=*/16);   // each drafter adds paths, merged on shared prefixes
//     reuse.propose(history, tree, 16);
//
// Drafters are per request (they hold request state) and belong to one thread.
#pragma once

#include "llama.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace editspec {

// which drafter proposed a node; also the index of the per-source statistics
enum draft_source : uint8_t {
    DRAFT_SOURCE_LOOKUP    = 0, // prompt lookup (n-gram match over context + output)
    DRAFT_SOURCE_REUSE     = 1, // EfficientEdit Reuse: the original code
    DRAFT_SOURCE_COPY      = 2, // CopySpec γ-gram copy
    DRAFT_SOURCE_RETRIEVAL = 3, // FastCoder datastore retrieval
    DRAFT_SOURCE_MODEL     = 4, // small draft model
    DRAFT_SOURCE_TEST      = 5, // tests and replay oracles
    DRAFT_SOURCE_COUNT     = 6,
};

const char * draft_source_name(uint8_t source);

// whether two sources draft from different evidence: prompt lookup and CopySpec both read the
// request's own tokens, so their agreeing says little (measured: counting it cost MT-Redundant's
// turns 40 % of their tokens per pass); Reuse (the original code), retrieval (datastores) and a
// draft model each bring their own
bool draft_sources_independent(uint8_t a, uint8_t b);

struct draft_node {
    llama_token token;
    int32_t     parent;  // index in draft_tree::nodes, -1 = child of the last committed token
    uint8_t     source;  // draft_source of the drafter that proposed it first
    uint8_t     conf = 0; // drafter's confidence class, 0 .. DRAFT_CONF_COUNT-1 (e.g. lookup's match
                          // length, a draft model's probability): acceptance statistics are kept per
                          // source and class
    uint8_t     agreed = 0; // a drafter of independent evidence proposed the same token here too
                            // (draft_tree::add, add_path; draft_sources_independent)
    uint8_t     proposers = 0; // bit 1 << draft_source of every drafter that proposed this token here,
                               // the placer's included (draft_tree::add, add_path): Predicted Outputs'
                               // counts are the nodes Reuse proposed, wherever it stands in the order
};

constexpr int32_t DRAFT_CONF_COUNT = 8;
// the classes acceptance statistics are kept by: a drafter's confidence class, and whether another
// drafter agreed (two drafters that propose the same continuation from different evidence, e.g.
// Reuse from the original code and lookup from the prompt, are right more often than either alone:
// on CanItEdit edits, shipped models, it took auto from 0.92 to 1.01 of lookup-longest's speed)
constexpr int32_t DRAFT_CLASS_COUNT = 2 * DRAFT_CONF_COUNT;
inline uint8_t draft_class(const draft_node & nd) {
    return (uint8_t) (nd.conf + (nd.agreed ? DRAFT_CONF_COUNT : 0));
}

struct draft_tree {
    std::vector<draft_node> nodes; // [n_nodes], parents precede children

    void clear() { nodes.clear(); }
    int32_t size() const { return (int32_t) nodes.size(); }
    bool empty() const { return nodes.empty(); }

    // child of `parent` carrying `token`, or -1
    int32_t find_child(int32_t parent, llama_token token) const;
    // adds token under parent unless that child exists (then marked agreed when another source placed
    // it); returns the child's index
    int32_t add(int32_t parent, llama_token token, uint8_t source, uint8_t conf = 0);
    // adds a path under parent, merging shared prefixes (marked agreed where another source placed
    // them); stops when the tree holds max_nodes
    // nodes. Returns the index of the deepest node of the path that is in the tree (parent if none).
    int32_t add_path(int32_t parent, std::span<const llama_token> tokens, uint8_t source, int32_t max_nodes,
                     uint8_t conf = 0);
    // depth of node i (root children have depth 1)
    int32_t depth(int32_t i) const;
    // every node's depth, in one pass (parents precede children)
    std::vector<int32_t> depths() const;
    // the deepest node's depth, 0 for an empty tree
    int32_t max_depth() const;
    // the nodes with keep[i] set, in order, parents re-indexed; the kept set must be closed under
    // parents (a kept node's parent is kept)
    draft_tree kept(const std::vector<bool> & keep) const;
    // tokens from the root to node i, inclusive
    std::vector<llama_token> path_to(int32_t i) const;
    // indices of nodes with no children
    std::vector<int32_t> leaves() const;
};

// A drafter's lifecycle, as common_speculative_impl's: begin once per request, then per step
// propose into the shared tree and hear what the target accepted.
struct drafter_i {
    virtual ~drafter_i() = default;
    virtual const char * name() const = 0;
    virtual uint8_t source() const = 0;
    // prompt: the tokens of the request before any output
    virtual void begin(std::span<const llama_token> prompt) = 0;
    // history: every committed token (prompt + output so far). Adds at most `budget` nodes.
    virtual void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) = 0;
    // tokens the target committed this step (accepted drafts + the target's own token)
    virtual void accept(std::span<const llama_token> accepted) = 0;
    // after sizing, before the target's pass: `sent` is what the target verifies (every drafter's
    // nodes the sizing kept). A drafter whose proposals cost real time backs off here (draft_backoff).
    virtual void sized(const draft_tree & sent) {}
    // begin() reads the target's states of every prompt token (a head that follows the target's
    // passes): the decoder then decodes the whole prompt before begin(), not its end in the first pass
    virtual bool follows_target() const { return false; }
};

// Two drafters as one: a cheap first one and a costly second one that drafts where the first has
// nothing (CopySpec with a draft model, EfficientEdit's Reuse and Generate phases). Both hear
// begin(), accept() and sized(); the subclass's propose() says who drafts. Nodes keep the sources of
// the drafter that placed them.
template <class First> class drafter_pair : public drafter_i {
public:
    drafter_pair(std::unique_ptr<First> first, std::unique_ptr<drafter_i> second)
        : first_(std::move(first)), second_(std::move(second)) {}
    // the source of its costlier part
    uint8_t source() const override { return second_->source(); }
    void begin(std::span<const llama_token> prompt) override {
        first_->begin(prompt);
        second_->begin(prompt);
    }
    void accept(std::span<const llama_token> accepted) override {
        first_->accept(accepted);
        second_->accept(accepted);
    }
    // both hear what was sent, so a draft model backs off on its own (draft_backoff) while the
    // sizing drops its nodes, and the first drafter keeps drafting meanwhile
    void sized(const draft_tree & sent) override {
        first_->sized(sent);
        second_->sized(sent);
    }
    bool follows_target() const override { return first_->follows_target() || second_->follows_target(); }

protected:
    std::unique_ptr<First> first_;
    std::unique_ptr<drafter_i> second_;
};

// Back-off for a drafter whose proposals cost real time (a draft model's passes): that time is not
// in the cost model, so a proposal the sizing drops is pure loss (a small target on exact kernels,
// where long passes barely pay). After each proposal of which nothing was sent it waits 1, 2, 4,
// ... 32 passes before proposing again; one sent node resets it.
//
//     void propose(...) { if (backoff.skip()) return; ...add nodes...; backoff.proposed(added); }
//     void sized(const draft_tree & sent) { backoff.sized(sent, source()); }
struct draft_backoff {
    int32_t wait    = 0;     // passes left to skip
    int32_t step    = 0;     // the current wait after a dropped proposal: 0, 1, 2, 4, ... 32
    bool    pending = false; // proposed this pass, not yet sized

    // true while waiting (and counts the pass)
    bool skip();
    void proposed(bool added) { pending = added; }
    // nodes of `source` in `sent`: the proposal paid
    void sized(const draft_tree & sent, uint8_t source);
};

} // namespace editspec
