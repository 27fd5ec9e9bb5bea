// EfficientEdit's Reuse drafter: the original code as the draft, a pointer that follows the
// output, re-synchronisation by suffix matching after an edit.
//
// ref: Wang et al., "EfficientEdit: Accelerating Code Editing via Edit-Oriented Speculative Decoding"
// §III-A; their code, efficienedit/speculative_sampling.py
//      find_suffix_and_return_remaining (gamma = 7, first occurrence in the remaining original)
#include "editspec/drafters.h"
#include "editspec/reuse.h"
#include "editspec/match.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace editspec {

const char * reuse_sync_name(reuse_sync rule) {
    switch (rule) {
        case REUSE_SYNC_PAPER:    return "paper";
        case REUSE_SYNC_LONGEST:  return "longest";
        case REUSE_SYNC_K_DOWN:   return "k-down";
        case REUSE_SYNC_NEAREST:  return "nearest";
        case REUSE_SYNC_BRANCHES: return "branches";
        default:                  return "unknown";
    }
}

reuse_params reuse_params_for(reuse_sync rule) {
    reuse_params p;
    p.sync = rule;
    switch (rule) {
        case REUSE_SYNC_PAPER:  p.k_min = 7; p.k_max = 7; break;
        case REUSE_SYNC_K_DOWN: p.k_min = 2; p.k_max = 8; break;
        default:                p.k_min = 1; p.k_max = 64; break;
    }
    return p;
}

// ----------------------------------------------------------------------------
// re-sync

namespace {

struct match_t {
    int32_t e; // continuation starts at original[e]
    int32_t k; // matched tokens before e
};

// every e in [1, n) with k(e) >= 1, ascending e; k capped at k_max
std::vector<match_t> suffix_matches(std::span<const llama_token> history, std::span<const llama_token> original,
                                    int32_t k_max) {
    std::vector<match_t> out;
    const int32_t n = (int32_t) original.size();
    const int32_t L = (int32_t) history.size();
    if (L == 0 || k_max < 1) {
        return out;
    }
    const llama_token last = history[L - 1];
    for (int32_t e = 1; e < n; e++) {
        if (original[e - 1] != last) {
            continue;
        }
        out.push_back({e, (int32_t) match_suffix_len(original, e, history, k_max)});
    }
    return out;
}

// largest k >= k_min; ties: the first e >= p, else the last e < p (the nearest before p)
int32_t pick_longest(const std::vector<match_t> & ms, int32_t p, int32_t k_min) {
    int32_t best = -1;
    for (int32_t i = 0; i < (int32_t) ms.size(); i++) {
        const match_t & m = ms[i];
        if (m.k < k_min) continue;
        if (best < 0 || m.k > ms[best].k) {
            best = i;
            continue;
        }
        if (m.k < ms[best].k) continue;
        // tie: ascending e, so m.e > ms[best].e
        const bool best_after = ms[best].e >= p;
        if (!best_after) best = i; // a later one is nearer p (or at/after it)
    }
    return best;
}

} // namespace

std::vector<reuse_candidate> reuse_sync_candidates(std::span<const llama_token> history,
                                                   std::span<const llama_token> original, int32_t p,
                                                   const reuse_params & params) {
    std::vector<reuse_candidate> out;
    const std::vector<match_t> ms = suffix_matches(history, original, params.k_max);
    if (ms.empty()) {
        return out;
    }
    const int32_t k_min = std::max(1, params.k_min);
    switch (params.sync) {
        case REUSE_SYNC_PAPER: {
            // the whole k-token match inside original[p ..]: e - k >= p
            for (const match_t & m : ms) {
                if (m.k >= k_min && m.e - m.k >= p) {
                    out.push_back({m.e, m.k});
                    break;
                }
            }
            break;
        }
        case REUSE_SYNC_LONGEST: {
            const int32_t i = pick_longest(ms, p, k_min);
            if (i >= 0) out.push_back({ms[i].e, ms[i].k});
            break;
        }
        case REUSE_SYNC_K_DOWN: {
            int32_t k_best = 0;
            for (const match_t & m : ms) k_best = std::max(k_best, m.k);
            if (k_best < k_min) break;
            for (const match_t & m : ms) {
                if (m.k >= k_best) {
                    out.push_back({m.e, m.k});
                    break;
                }
            }
            break;
        }
        case REUSE_SYNC_NEAREST:
        case REUSE_SYNC_BRANCHES: {
            int32_t near = -1;
            for (int32_t i = 0; i < (int32_t) ms.size(); i++) {
                if (ms[i].e >= p && ms[i].k >= k_min) {
                    near = i;
                    break;
                }
            }
            const int32_t lon = pick_longest(ms, p, k_min);
            const int32_t first = near >= 0 ? near : lon;
            if (first >= 0) out.push_back({ms[first].e, ms[first].k});
            if (params.sync == REUSE_SYNC_NEAREST) break;
            if (lon >= 0 && lon != first) out.push_back({ms[lon].e, ms[lon].k});
            // then by k descending, nearest to p first
            std::vector<int32_t> rest;
            for (int32_t i = 0; i < (int32_t) ms.size(); i++) {
                if (i != first && i != lon && ms[i].k >= k_min) rest.push_back(i);
            }
            std::stable_sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) {
                if (ms[a].k != ms[b].k) return ms[a].k > ms[b].k;
                return std::abs(ms[a].e - p) < std::abs(ms[b].e - p);
            });
            for (int32_t i : rest) {
                if ((int32_t) out.size() >= params.n_branch) break;
                out.push_back({ms[i].e, ms[i].k});
            }
            if ((int32_t) out.size() > params.n_branch) out.resize(std::max(1, params.n_branch));
            break;
        }
    }
    return out;
}

// ----------------------------------------------------------------------------
// the drafter

// Confidence classes (accept_stats keeps acceptance per class and depth): a re-sync by its match
// length (1 .. 3, longer matches as 3); in step with the original by how long it has been: the
// longer a stretch of code has come out unchanged, the likelier the next tokens are unchanged too
// (an edit is a few lines among many), which per-depth statistics alone cannot see.
static uint8_t reuse_conf_synced(int32_t run) {
    return run < 4 ? 4 : run < 16 ? 5 : run < 64 ? 6 : 7;
}

reuse_drafter::reuse_drafter(std::span<const llama_token> original, const reuse_params & params)
    : original_(original.begin(), original.end()), params_(params) {}

void reuse_drafter::begin(std::span<const llama_token> prompt) {
    p_ = 0;
    synced_ = true;
    run_ = 0;
    live_.clear();
    live_prefix_.clear();
    live_resync_ = false;
}

void reuse_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    live_.clear();
    live_prefix_.clear();
    live_resync_ = false;
    const int32_t n = (int32_t) original_.size();
    if (budget <= 0 || n == 0) {
        return;
    }
    std::vector<reuse_candidate> cands;
    if (synced_) {
        if (p_ < n) cands.push_back({p_, 0});
    } else {
        cands = reuse_sync_candidates(history, original_, p_, params_);
        live_resync_ = !cands.empty();
        n_resyncs += live_resync_ ? 1 : 0;
    }
    if (cands.empty()) {
        return;
    }
    // the budget is shared: the first candidate gets the remainder
    const int32_t n_c   = (int32_t) cands.size();
    const int32_t share = std::max(1, budget / n_c);
    const int64_t end_nodes = std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    for (int32_t c = 0; c < n_c; c++) {
        const int32_t want = c == 0 ? std::max(share, budget - share * (n_c - 1)) : share;
        int32_t len = std::min({want, params_.m_max, n - cands[c].pos});
        if (!synced_ && params_.resync_len > 0) {
            len = std::min<int64_t>(len, (int64_t) params_.resync_len << std::min(cands[c].k - 1, 20));
        }
        if (len <= 0) continue;
        const int64_t max_nodes = std::min<int64_t>((int64_t) tree.size() + len, end_nodes);
        const uint8_t conf = synced_ ? reuse_conf_synced(run_) : (uint8_t) std::clamp<int32_t>(cands[c].k, 1, 3);
        tree.add_path(-1, std::span<const llama_token>(original_).subspan(cands[c].pos, len), DRAFT_SOURCE_REUSE,
                      (int32_t) max_nodes, conf);
        live_.push_back(cands[c]);
        live_prefix_.emplace_back();
    }
}

int32_t reuse_drafter::propose_after(std::span<const llama_token> history, draft_tree & tree, int32_t first,
                                     int32_t end, int32_t budget) {
    const int32_t n = (int32_t) original_.size();
    end = std::min(end, tree.size());
    if (synced_ || budget <= 0 || n == 0 || params_.attach_k_min <= 0 || first >= end) {
        return 0;
    }
    reuse_params rule = params_;
    rule.sync  = REUSE_SYNC_NEAREST;
    rule.k_min = params_.attach_k_min;
    token_vec hist(history.begin(), history.end());
    // the deepest node first: the longer the other drafter's path, the more it has already written
    for (int32_t i = end - 1; i >= first; i--) {
        const token_vec path = tree.path_to(i);
        hist.resize(history.size());
        hist.insert(hist.end(), path.begin(), path.end());
        const std::vector<reuse_candidate> cands = reuse_sync_candidates(hist, original_, p_, rule);
        if (cands.empty() || cands[0].pos < p_) {
            continue; // only where the original goes on after the edit point
        }
        const reuse_candidate c = cands[0];
        int32_t len = std::min({budget, params_.m_max, n - c.pos});
        if (params_.resync_len > 0) {
            len = std::min<int64_t>(len, (int64_t) params_.resync_len << std::min(c.k - 1, 20));
        }
        const int32_t before = tree.size();
        tree.add_path(i, std::span<const llama_token>(original_).subspan(c.pos, len), DRAFT_SOURCE_REUSE,
                      before + len, (uint8_t) std::clamp<int32_t>(c.k, 1, 3));
        if (tree.size() == before) {
            return 0;
        }
        live_.push_back(c);
        live_prefix_.push_back(path);
        live_resync_ = true;
        n_attached++;
        return tree.size() - before;
    }
    return 0;
}

void reuse_drafter::accept(std::span<const llama_token> accepted) {
    const int32_t n = (int32_t) original_.size();
    std::vector<reuse_candidate> cands = live_;
    std::vector<token_vec> prefixes = live_prefix_;
    if (cands.empty() && synced_) {
        cands.push_back({p_, 0}); // no proposal this pass (no budget): keep following the original
        prefixes.emplace_back();
    }
    const bool was_resync = live_resync_;
    live_.clear();
    live_prefix_.clear();
    live_resync_ = false;
    if (cands.empty() || accepted.empty()) {
        return;
    }
    // how far each candidate's continuation was committed (an attached one: after its prefix, the
    // other drafter's path, and only if some of the continuation was)
    int32_t best = 0, best_j = -1, best_skip = 0;
    for (int32_t c = 0; c < (int32_t) cands.size(); c++) {
        const int32_t skip = (int32_t) prefixes[c].size();
        if (skip >= (int32_t) accepted.size() || !std::equal(prefixes[c].begin(), prefixes[c].end(), accepted.begin())) {
            continue;
        }
        int32_t j = 0;
        while (skip + j < (int32_t) accepted.size() && cands[c].pos + j < n &&
               original_[cands[c].pos + j] == accepted[skip + j]) {
            j++;
        }
        if (skip > 0 && j == 0) {
            continue;
        }
        if (skip + j > best_j) {
            best_j = skip + j;
            best = c;
            best_skip = skip;
        }
    }
    if (best_j < 0) { // only attached candidates, none taken
        best_j = 0;
        best = -1;
    }
    if (was_resync && best_j > 0) {
        n_resync_ok++;
    }
    if (best >= 0 && best_j == (int32_t) accepted.size()) {
        run_ = synced_ && !was_resync ? run_ + best_j : best_j - best_skip;
        synced_ = true;
        p_ = cands[best].pos + best_j - best_skip;
        return;
    }
    run_ = 0;
    // a committed token left the original: an edit starts at pos + j
    if (synced_) {
        n_edits++;
    }
    synced_ = false;
    if (best >= 0 && (best_j > 0 || !was_resync)) {
        p_ = cands[best].pos + best_j - best_skip;
    }
    // a re-sync whose first token was rejected leaves the edit point where it was
}

// the table's row (drafters.h)
std::span<const drafter_desc> reuse_drafters() {
    static const drafter_desc rows[] = {
        {"reuse", "EfficientEdit's Reuse: the original code (edit requests, or a prediction), re-synced after each edit",
         DRAFTER_NEEDS_ORIGINAL, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE,
         [](const drafter_desc &, const drafter_inputs & in, std::string *) -> std::unique_ptr<drafter_i> {
             return std::make_unique<reuse_drafter>(in.original);
         },
         // auto's after lookup (or FastCoder) and copy, before a draft model: placed first it cut the
         // others' chains, 9.87 tokens a pass against 10.87 on HumanEval with a datastore, 6.05 against
         // 6.17 on CanItEdit edits, 17.42 against 17.69 on constrained applies (shipped models,
         // docs/results/issue38-auto). Predicted Outputs' counts read the nodes Reuse proposed, placed
         // or agreed (draft_node::proposers), so the order does not move them
         4},
    };
    return rows;
}

} // namespace editspec
