// Retrieval drafts (REST; FastCoder / CodeSwift §III-A, seeds 002 and 004): the longest suffix of
// the context, 16 tokens down, found in the datastores (datastore.h); the continuations of its
// occurrences merged in a trie weighted by how often each occurs; the most frequent paths drafted.
//
//     editspec::datastore ds;  editspec::datastore_open("repo.eds", &model, ds, &err);
//     const editspec::datastore * stores[] = {&ds};
//     editspec::retrieval_drafter rest(stores);
//     rest.propose(history, tree, /*budget=*/32);
//
// This is the paper's baseline (REST: one datastore role, no cache, no retrieval timing); FastCoder's
// repository/common split, cache, retrieval timing and α/β-weighted trie build on it (fastcoder.h).
#pragma once

#include "editspec/datastore.h"
#include "editspec/draft.h"

#include <span>
#include <vector>

namespace editspec {

struct retrieval_params {
    int32_t n_max = 16;           // longest suffix looked up, tokens
    int32_t n_min = 2;            // shortest (one token matches nearly everywhere: no information)
    int32_t max_occurrences = 64; // continuations read per retrieval (REST reads a bounded sample)
    int32_t depth = 16;           // tokens per continuation
    int32_t n_paths = 4;          // most paths drafted, the most frequent first
};

// a weighted trie of continuations; node 0 is the root
struct retrieval_trie {
    struct node {
        llama_token token;
        int32_t parent;
        float weight;             // summed weights of the continuations through this node
        int32_t first_child = -1; // children as a list: a node has few
        int32_t next_sibling = -1;
    };
    std::vector<node> nodes;

    void clear() { nodes.assign(1, {LLAMA_TOKEN_NULL, -1, 0.0f}); }
    // one continuation of weight w (REST: 1; FastCoder: α from the repository, β from the common store)
    void add(std::span<const llama_token> continuation, float w = 1.0f);
    // up to n paths, root excluded: the heaviest child at every step, then from each next heaviest
    // first child, and so on; each path stops where the continuations that agree weigh < min_weight
    std::vector<token_vec> top_paths(int32_t n, float min_weight = 1.0f) const;
    // adds another trie's continuations (node by node, weights summed)
    void merge(const retrieval_trie & other);
};

// REST's search of one datastore: the longest suffix of history, n_max tokens down to n_min, that
// occurs in it; the continuations (up to depth tokens, not across a file) of up to max_occurrences
// of its occurrences go into the trie with weight w. Returns the matched length, 0 for none.
int32_t retrieval_search(const datastore & ds, std::span<const llama_token> history, const retrieval_params & p,
                         retrieval_trie & trie, float w);

// paths (a trie's top paths) into the tree, at most budget nodes in all, as a proposal of `source`
// whose suffix matched `match` tokens
void retrieval_propose(std::span<const token_vec> paths, int32_t match, draft_tree & tree, int32_t budget,
                       uint8_t source = DRAFT_SOURCE_RETRIEVAL);

class retrieval_drafter : public drafter_i {
public:
    explicit retrieval_drafter(std::span<const datastore * const> stores, const retrieval_params & params = {});

    const char * name() const override { return "rest"; }
    uint8_t source() const override { return DRAFT_SOURCE_RETRIEVAL; }
    void begin(std::span<const llama_token> prompt) override {}
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override {}

    retrieval_params params;
    int32_t last_match = 0;   // tokens matched by the last retrieval (0 = none)

private:
    std::vector<const datastore *> stores_;
    retrieval_trie trie_;
};

} // namespace editspec
