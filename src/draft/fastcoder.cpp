// FastCoder / CodeSwift: multi-source retrieval, a cache of verified drafts, retrieval timing and
// a weighted trie, on REST's search (retrieval.cpp).
//
// ref: "CodeSwift: Accelerating LLM Inference for Efficient Code Generation" §4.1-4.4 and Algorithm 1;
// Zhao et al., "FastCoder: Accelerating Repository-level Code Generation via Efficient Retrieval and
// Verification" §III-A..D, the same method
#include "editspec/clock.h"
#include "editspec/drafters.h"
#include "editspec/fastcoder.h"
#include "editspec/lookup.h"
#include "editspec/match.h"

#include <algorithm>
#include <chrono>
#include <future>

namespace editspec {

namespace {

uint64_t tail_hash(std::span<const llama_token> h, size_t n) {
    uint64_t x = 1469598103934665603ull ^ std::min(n, h.size());
    for (size_t i = h.size() - std::min(n, h.size()); i < h.size(); i++) {
        x = (x ^ (uint32_t) h[i]) * 1099511628211ull;
    }
    return x;
}

} // namespace

void retrieval_cache::add(std::span<const llama_token> sequence) {
    if (sequence.size() < 3) return; // a pair and one continuation at least
    for (llama_token t : sequence) {
        tokens_.push_back(t);
        const size_t i = tokens_.size(); // the position after t: where a continuation of (.., t) starts
        if (i >= 2 && tokens_[i - 2] != DATASTORE_SEP) pairs_[pair_key(tokens_[i - 2], tokens_[i - 1])].push_back((int32_t) i);
    }
    tokens_.push_back(DATASTORE_SEP);
    n_seq_++;
}

void retrieval_cache::clear() {
    tokens_.clear();
    pairs_.clear();
    n_seq_ = 0;
}

int32_t retrieval_cache::search(std::span<const llama_token> history, const retrieval_params & p, retrieval_trie & trie,
                                float w) const {
    if (history.size() < 2) return 0;
    const auto it = pairs_.find(pair_key(history[history.size() - 2], history.back()));
    if (it == pairs_.end()) return 0;
    // the longest match ending at each candidate, read backwards; the longest win (as in a datastore,
    // where the longest suffix that occurs is taken, with all its occurrences)
    const size_t n_max = std::min<size_t>((size_t) std::max(p.n_max, 2), history.size());
    int32_t best = 0;
    std::vector<int32_t> at;
    for (int32_t pos : it->second) {
        size_t k = 2;
        while (k < n_max && (size_t) pos > k && tokens_[pos - 1 - k] != DATASTORE_SEP &&
               tokens_[pos - 1 - k] == history[history.size() - 1 - k]) k++;
        if (tokens_[pos] == DATASTORE_SEP) continue; // nothing follows
        if ((int32_t) k > best) {
            best = (int32_t) k;
            at.clear();
        }
        if ((int32_t) k == best) at.push_back(pos);
    }
    if (best < std::max(p.n_min, 2)) return 0;
    // the most recent occurrences first: the cache's newest sequences are the likeliest
    std::reverse(at.begin(), at.end());
    if ((int32_t) at.size() > p.max_occurrences) at.resize((size_t) p.max_occurrences);
    for (int32_t s : at) {
        int32_t e = s;
        while (e < (int32_t) tokens_.size() && e - s < p.depth && tokens_[e] != DATASTORE_SEP) e++;
        trie.add(std::span<const llama_token>(tokens_).subspan((size_t) s, (size_t) (e - s)), w);
    }
    return best;
}

fastcoder_drafter::fastcoder_drafter(const model & target, std::span<const datastore * const> repo,
                                     std::span<const datastore * const> common, retrieval_cache * cache,
                                     const fastcoder_params & params)
    : params(params), repo_(repo.begin(), repo.end()), common_(common.begin(), common.end()),
      cache_(cache ? cache : &own_cache_), rng_(params.seed) {
    const int32_t n_vocab = target.facts().n_vocab;
    line_end_.assign((size_t) n_vocab, 0);
    blank_.assign((size_t) n_vocab, 0);
    for (int32_t t = 0; t < n_vocab; t++) {
        const std::string s = target.token_to_piece(t);
        if (s.empty()) continue;
        size_t i = s.size();
        while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) i--;
        blank_[t] = i == 0;
        line_end_[t] = i > 0 && s[i - 1] == '\n';
    }
}

void fastcoder_drafter::begin(std::span<const llama_token> prompt) {
    const size_t keep = (size_t) params.retrieval.n_max;
    recent_.assign(prompt.end() - (ptrdiff_t) std::min(keep, prompt.size()), prompt.end());
    prompt_.assign(prompt.end() - (ptrdiff_t) std::min<size_t>(prompt.size(), 8192), prompt.end());
    prompt_cached_ = false;
    n_output_ = 0;
    proposed_ = false;
    missing_.clear();
    rng_.seed(params.seed);
    stats = {};
}

// the next token is a line's first non-whitespace token: the context ends in a newline and its
// indentation (the line's blanks may be tokens of their own)
bool fastcoder_drafter::at_line_start(std::span<const llama_token> history) const {
    for (size_t i = history.size(); i > 0; i--) {
        const llama_token t = history[i - 1];
        if (t < 0 || (size_t) t >= line_end_.size()) return false;
        if (line_end_[t]) return true;
        if (!blank_[t]) return false;
    }
    return false;
}

int32_t fastcoder_drafter::search_stores(std::span<const llama_token> history) {
    const retrieval_params & rp = params.retrieval;
    const bool repo = params.use_repo && !repo_.empty();
    auto search_all = [&](const std::vector<const datastore *> & stores, retrieval_trie & trie, float w) {
        int32_t m = 0;
        for (const datastore * ds : stores) m = std::max(m, retrieval_search(*ds, history, rp, trie, w));
        return m;
    };
    // D_r into a trie of its own (on a helper thread when D_c is searched too), D_c into trie_
    trie_repo_.clear();
    int32_t m_r = 0, m_c = 0;
    if (repo && !common_.empty()) {
        auto fr = std::async(std::launch::async, [&] { return search_all(repo_, trie_repo_, params.alpha); });
        m_c = search_all(common_, trie_, params.beta);
        m_r = fr.get();
    } else {
        if (repo) m_r = search_all(repo_, trie_repo_, params.alpha);
        m_c = search_all(common_, trie_, params.beta);
    }
    // only the store(s) whose suffix matched longest go into the trie (measured: D_c's many short
    // matches otherwise outweigh D_r's long one)
    if (m_r > m_c) {
        std::swap(trie_, trie_repo_);
    } else if (m_r == m_c) {
        trie_.merge(trie_repo_);
    }
    return std::max(m_r, m_c);
}

// the history's own occurrences of its longest suffix (n_max .. n_min tokens; the most recent
// max_occurrences of them) and their continuations, into trie_ctx_; returns the matched length
int32_t fastcoder_drafter::search_context(std::span<const llama_token> history) {
    const retrieval_params & rp = params.retrieval;
    const int64_t L = (int64_t) history.size();
    trie_ctx_.clear();
    if (L < 2) return 0;
    int64_t best = std::max(rp.n_min, 1) - 1;
    std::vector<int64_t> at; // ends of the longest matches, most recent first
    for (int64_t e = L - 1; e >= 1; e--) {
        if (history[(size_t) e - 1] != history.back()) continue;
        const int64_t k = match_suffix_len(history, e, history, rp.n_max);
        if (k > best) {
            best = k;
            at.clear();
        }
        if (k == best && (int32_t) at.size() < rp.max_occurrences) at.push_back(e);
    }
    if (at.empty()) return 0;
    for (int64_t e : at) {
        const int64_t end = std::min(L, e + rp.depth);
        trie_ctx_.add(history.subspan((size_t) e, (size_t) (end - e)), 1.0f);
    }
    return (int32_t) best;
}

void fastcoder_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    proposed_ = false;
    if (budget <= 0 || history.empty()) return;
    stats.proposals++;
    trie_.clear();
    int32_t match = 0;
    // Algorithm 1: the cache first once it holds l sequences
    if (params.use_cache && cache_->n_sequences() >= params.cache_min) {
        match = cache_->search(history, params.retrieval, trie_, 1.0f);
        if (match > 0 && match < params.cache_min_match) {
            match = 0;
            trie_.clear();
        }
        if (match > 0) stats.from_cache++;
    }
    if (match == 0) {
        const uint64_t key = tail_hash(history, (size_t) params.retrieval.n_max);
        bool search = true;
        if (params.use_timing) {
            if (missing_.count(key)) {
                search = false;
                stats.skipped_missing++;
            } else if (at_line_start(history) &&
                       std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_) >= params.skip_p) {
                search = false;
                stats.skipped_token++;
            }
        }
        if (search) {
            stats.searched++;
            trie_.clear();
            match = search_stores(history);
            if (match > 0) stats.found++;
            else if (params.use_timing) missing_.insert(key);
        }
    }
    // the request's own tokens, searched at every pass (cheap: a scan of the history): their longest
    // suffix match wins over the stores' and the cache's when at least as long
    if (params.use_context) {
        const int32_t m_ctx = search_context(history);
        if (m_ctx > 0 && m_ctx >= match) {
            stats.from_context++;
            // budget nodes in all, not per path
            retrieval_propose(trie_ctx_.top_paths(params.retrieval.n_paths, 0.0f), m_ctx, tree, budget, DRAFT_SOURCE_LOOKUP);
            return;
        }
    }
    if (match == 0) return;
    proposed_ = true;
    retrieval_propose(trie_.top_paths(params.retrieval.n_paths, 0.0f), match, tree, budget);
}

void fastcoder_drafter::accept(std::span<const llama_token> accepted) {
    const size_t ctx = (size_t) params.retrieval.n_max;
    const auto context_tail = [&](size_t extra) {
        const size_t n = std::min(ctx + extra, recent_.size());
        return token_vec(recent_.end() - (ptrdiff_t) n, recent_.end());
    };
    // §4.2 caches the whole context s with each verified draft (x_1 .. x_t, y_1 .. y_j): the request's
    // context goes in once, the first time the cache takes anything of this request, and each
    // sequence after it carries only the n_max tokens its suffix match can use
    const auto add = [&](const token_vec & seq) {
        if (!prompt_cached_) {
            cache_->add(prompt_);
            prompt_cached_ = true;
        }
        cache_->add(seq);
    };
    if (params.use_cache && accepted.size() >= 2) {
        // a retrieved draft the target verified (at least one token): its context and the verified
        // tokens go into the cache (§4.2)
        // the accepted drafts (all but the target's own last token) are a path of this pass's trie
        int32_t at = 0;
        for (size_t i = 0; proposed_ && at >= 0 && i + 1 < accepted.size(); i++) {
            int32_t c = trie_.nodes[at].first_child;
            while (c >= 0 && trie_.nodes[c].token != accepted[i]) c = trie_.nodes[c].next_sibling;
            at = c;
        }
        if (proposed_ && at > 0) {
            token_vec seq = context_tail(0);
            seq.insert(seq.end(), accepted.begin(), accepted.end());
            add(seq);
        }
    }
    proposed_ = false;
    for (llama_token t : accepted) {
        recent_.push_back(t);
        if (params.use_cache && ++n_output_ >= params.output_chunk) {
            // the model's own output, every output_chunk tokens, after the context it followed
            add(context_tail((size_t) n_output_));
            n_output_ = 0;
        }
    }
    const size_t keep = 2 * (ctx + (size_t) std::max(params.output_chunk, 0));
    if (recent_.size() > 2 * keep) recent_.erase(recent_.begin(), recent_.end() - (ptrdiff_t) keep);
}

// the table's rows (drafters.h): FastCoder and its Table II ablations, each part off in turn
namespace {

std::unique_ptr<drafter_i> make_fastcoder(const drafter_desc & self, const drafter_inputs & in, std::string * error) {
    if (!in.target) {
        if (error) *error = std::string(self.name) + " needs the target model (its vocabulary)";
        return nullptr;
    }
    const std::string name = self.name;
    fastcoder_params fp;
    fp.use_repo = name != "fastcoder-no-repo";
    fp.use_cache = name != "fastcoder-no-cache";
    fp.use_timing = name != "fastcoder-no-timing";
    fp.use_context = name != "fastcoder-no-context";
    fp.alpha = in.settings.alpha;
    fp.beta = in.settings.beta;
    fp.skip_p = in.settings.skip_p;
    fp.cache_min = in.settings.cache_min;
    fp.retrieval.n_max = in.settings.retrieve_max;
    return std::make_unique<fastcoder_drafter>(*in.target, in.repo_datastores, in.datastores, in.cache, fp);
}

} // namespace

std::span<const drafter_desc> fastcoder_drafters() {
    static const drafter_desc rows[] = {
        {"fastcoder", "FastCoder / CodeSwift: the repository's (--repo-datastore) and common (--datastore) datastores "
                      "in parallel, a weighted trie, a cache of verified drafts, retrieval timing",
         DRAFTER_NEEDS_DATASTORE, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_fastcoder,
         // auto's second where there are datastores, in prompt lookup's place: it searches the request's
         // own tokens too (its context match wins ties); on HumanEval with the standard library's
         // datastore fastcoder+copy ran 5.47x, fastcoder 5.38x, lookup-longest+copy+fastcoder 5.27x
         // (docs/results/issue38-auto)
         2},
        {"fastcoder-no-repo", "FastCoder without the repository's datastore", DRAFTER_NEEDS_DATASTORE,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_fastcoder},
        {"fastcoder-no-cache", "FastCoder without its cache of verified drafts", DRAFTER_NEEDS_DATASTORE,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_fastcoder},
        {"fastcoder-no-timing", "FastCoder retrieving at every step (no retrieval timing)", DRAFTER_NEEDS_DATASTORE,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_fastcoder},
        {"fastcoder-no-context", "FastCoder without drafts from the request's own context", DRAFTER_NEEDS_DATASTORE,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_fastcoder},
    };
    return rows;
}

} // namespace editspec
