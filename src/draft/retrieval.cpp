// REST-style retrieval drafts from datastores.
//
// ref: He et al., "REST: Retrieval-Based Speculative Decoding" (2024), as FastCoder (seed 002) §III-A
//      and CodeSwift (seed 004) use it: suffix match from the longest length down, continuations of
//      the occurrences in a trie, drafts by frequency
#include "editspec/retrieval.h"
#include "editspec/lookup.h"

#include <algorithm>
#include <climits>

namespace editspec {

void retrieval_trie::add(std::span<const llama_token> continuation) {
    int32_t at = 0;
    nodes[0].count++;
    for (llama_token t : continuation) {
        int32_t child = nodes[at].first_child;
        while (child >= 0 && nodes[child].token != t) child = nodes[child].next_sibling;
        if (child < 0) {
            nodes.push_back({t, at, 0, -1, nodes[at].first_child});
            child = (int32_t) nodes.size() - 1;
            nodes[at].first_child = child;
        }
        nodes[child].count++;
        at = child;
    }
}

std::vector<token_vec> retrieval_trie::top_paths(int32_t n, int32_t min_count) const {
    std::vector<token_vec> out;
    std::vector<bool> used(nodes.size(), false);
    // each path: from the root, the most frequent child not yet starting a drafted path, then the most
    // frequent child at every step below it
    for (int32_t p = 0; p < n; p++) {
        int32_t at = 0;
        token_vec path;
        bool first = true;
        while (true) {
            int32_t best = -1;
            for (int32_t i = nodes[at].first_child; i >= 0; i = nodes[i].next_sibling) {
                if (nodes[i].count < min_count || (first && used[i])) continue;
                // ties: the earlier child (the first continuation in suffix order) wins
                if (best < 0 || nodes[i].count > nodes[best].count || (nodes[i].count == nodes[best].count && i < best)) best = i;
            }
            if (best < 0) break;
            if (first) used[best] = true;
            first = false;
            path.push_back(nodes[best].token);
            at = best;
        }
        if (path.empty()) break;
        out.push_back(std::move(path));
    }
    return out;
}

retrieval_drafter::retrieval_drafter(std::span<const datastore * const> stores, const retrieval_params & params)
    : params(params), stores_(stores.begin(), stores.end()) {}

void retrieval_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    last_match = 0;
    if (budget <= 0 || history.empty()) {
        return;
    }
    trie_.clear();
    const int32_t k_max = (int32_t) std::min<size_t>((size_t) params.n_max, history.size());
    for (int32_t k = k_max; k >= params.n_min && last_match == 0; k--) {
        const auto pattern = history.subspan(history.size() - (size_t) k);
        for (const datastore * ds : stores_) {
            const datastore_range r = ds->find(pattern);
            const auto t = ds->tokens();
            const auto sa = ds->suffixes();
            const int64_t hi = std::min<int64_t>(r.hi, r.lo + params.max_occurrences);
            for (int64_t i = r.lo; i < hi; i++) {
                const int64_t s = sa[i] + k;
                int64_t e = s;
                while (e < ds->size() && e - s < params.depth && t[e] != DATASTORE_SEP) e++;
                if (e > s) trie_.add(t.subspan((size_t) s, (size_t) (e - s)));
            }
            if (r.count() > 0) last_match = k;
        }
    }
    if (last_match == 0) {
        return;
    }
    n_retrievals++;
    const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    for (const token_vec & path : trie_.top_paths(params.n_paths)) {
        tree.add_path(-1, path, DRAFT_SOURCE_RETRIEVAL, max_nodes, {}, lookup_conf(last_match));
        if (tree.size() >= max_nodes) break;
    }
}

} // namespace editspec
