// REST-style retrieval drafts from datastores.
//
// ref: He et al., "REST: Retrieval-Based Speculative Decoding" (2024), as FastCoder §III-A
//      and CodeSwift use it: suffix match from the longest length down, continuations of
//      the occurrences in a trie, drafts by frequency
#include "editspec/drafters.h"
#include "editspec/retrieval.h"
#include "editspec/lookup.h"

#include <algorithm>
#include <climits>

namespace editspec {

void retrieval_trie::add(std::span<const llama_token> continuation, float w) {
    int32_t at = 0;
    nodes[0].weight += w;
    for (llama_token t : continuation) {
        int32_t child = nodes[at].first_child;
        while (child >= 0 && nodes[child].token != t) child = nodes[child].next_sibling;
        if (child < 0) {
            nodes.push_back({t, at, 0.0f, -1, nodes[at].first_child});
            child = (int32_t) nodes.size() - 1;
            nodes[at].first_child = child;
        }
        nodes[child].weight += w;
        at = child;
    }
}

void retrieval_trie::merge(const retrieval_trie & other) {
    if (other.nodes.empty()) return;
    std::vector<int32_t> to(other.nodes.size(), 0); // other's node -> ours (parents come before children)
    nodes[0].weight += other.nodes[0].weight;
    for (size_t i = 1; i < other.nodes.size(); i++) {
        const node & o = other.nodes[i];
        const int32_t at = to[(size_t) o.parent];
        int32_t child = nodes[at].first_child;
        while (child >= 0 && nodes[child].token != o.token) child = nodes[child].next_sibling;
        if (child < 0) {
            nodes.push_back({o.token, at, 0.0f, -1, nodes[at].first_child});
            child = (int32_t) nodes.size() - 1;
            nodes[at].first_child = child;
        }
        nodes[child].weight += o.weight;
        to[i] = child;
    }
}

std::vector<token_vec> retrieval_trie::top_paths(int32_t n, float min_weight) const {
    std::vector<token_vec> out;
    std::vector<bool> used(nodes.size(), false);
    // each path: from the root, the heaviest child not yet starting a drafted path, then the heaviest
    // child at every step below it
    for (int32_t p = 0; p < n; p++) {
        int32_t at = 0;
        token_vec path;
        bool first = true;
        while (true) {
            int32_t best = -1;
            for (int32_t i = nodes[at].first_child; i >= 0; i = nodes[i].next_sibling) {
                if (nodes[i].weight < min_weight || (first && used[i])) continue;
                // ties: the earlier child (the first continuation in suffix order) wins
                if (best < 0 || nodes[i].weight > nodes[best].weight || (nodes[i].weight == nodes[best].weight && i < best)) best = i;
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

int32_t retrieval_search(const datastore & ds, std::span<const llama_token> history, const retrieval_params & p,
                         retrieval_trie & trie, float w) {
    const int32_t k_max = (int32_t) std::min<size_t>((size_t) p.n_max, history.size());
    const auto t = ds.tokens();
    const auto sa = ds.suffixes();
    for (int32_t k = k_max; k >= p.n_min; k--) {
        const datastore_range r = ds.find(history.subspan(history.size() - (size_t) k));
        if (r.count() == 0) continue;
        // at most max_occurrences, spread evenly over the range: the suffix array sorts the
        // occurrences by their continuations, so its first entries would all start alike (the
        // lexicographically smallest), while an even stride keeps each continuation's share
        const int64_t n = std::min<int64_t>(r.count(), p.max_occurrences);
        for (int64_t j = 0; j < n; j++) {
            const int64_t s = sa[r.lo + j * r.count() / n] + k;
            int64_t e = s;
            while (e < ds.size() && e - s < p.depth && t[e] != DATASTORE_SEP) e++;
            if (e > s) trie.add(t.subspan((size_t) s, (size_t) (e - s)), w);
        }
        return k;
    }
    return 0;
}

void retrieval_propose(std::span<const token_vec> paths, int32_t match, draft_tree & tree, int32_t budget, uint8_t source) {
    const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    for (const token_vec & path : paths) {
        tree.add_path(-1, path, source, max_nodes, lookup_conf(match));
        if (tree.size() >= max_nodes) break;
    }
}

retrieval_drafter::retrieval_drafter(std::span<const datastore * const> stores, const retrieval_params & params)
    : params(params), stores_(stores.begin(), stores.end()) {}

void retrieval_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    last_match = 0;
    if (budget <= 0 || history.empty()) {
        return;
    }
    trie_.clear();
    for (const datastore * ds : stores_) {
        last_match = std::max(last_match, retrieval_search(*ds, history, params, trie_, 1.0f));
    }
    if (last_match == 0) {
        return;
    }
    retrieval_propose(trie_.top_paths(params.n_paths, 0.0f), last_match, tree, budget);
}

// the table's row (drafters.h)
std::span<const drafter_desc> retrieval_drafters() {
    static const drafter_desc rows[] = {
        {"rest", "REST retrieval (FastCoder's baseline): the longest suffix of the context in the datastores "
                 "(--datastore), the most frequent continuations",
         DRAFTER_NEEDS_DATASTORE, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE,
         [](const drafter_desc & self, const drafter_inputs & in, std::string * error) -> std::unique_ptr<drafter_i> {
             if (in.datastores.empty()) {
                 if (error) *error = std::string(self.name) + " needs a common datastore (--datastore FILE, built by `editspec index`)";
                 return nullptr;
             }
             retrieval_params rp;
             rp.n_max = in.settings.retrieve_max;
             return std::make_unique<retrieval_drafter>(in.datastores, rp);
         }},
    };
    return rows;
}

} // namespace editspec
