// CopySpec's γ-gram copy drafter, its variants, and copy-else-draft-model (§3.3).
//
// ref: Dumitru et al., "CopySpec: Accelerating LLMs with Speculative Copy-and-Paste Without Compromising
// Quality"
//      §3.1 (the γ-gram hash map), §3.2 (copying |S| tokens after a match), §3.3 (with a draft model)
#include "editspec/drafters.h"
#include "editspec/draft-model.h"
#include "editspec/copy.h"

#include <algorithm>
#include <climits>

namespace editspec {

namespace {

constexpr uint64_t HASH_BASE = 0x100000001b3ull; // FNV's prime: odd, so the rolling hash is invertible mod 2^64

} // namespace

size_t copy_index::hash_mix::operator()(uint64_t x) const {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t) x;
}

copy_index::copy_index(int32_t gamma) : gamma_(std::max(1, gamma)) {
    for (int32_t i = 1; i < gamma_; i++) pow_ *= HASH_BASE;
}

void copy_index::clear() {
    tokens_.clear();
    prev_.clear();
    table_.clear();
    hash_ = 0;
}

void copy_index::append(std::span<const llama_token> tokens) {
    // (no reserve of the exact size: appended a token at a time, that would copy the whole stream each
    // time; push_back's geometric growth keeps a token O(1))
    if (prev_.empty()) prev_.push_back(-1); // position 0 ends no γ-gram
    for (llama_token t : tokens) {
        const int32_t n = (int32_t) tokens_.size();
        if (n >= gamma_) {
            hash_ -= (uint64_t) (uint32_t) tokens_[n - gamma_] * pow_; // the oldest token rolls out
        }
        hash_ = hash_ * HASH_BASE + (uint64_t) (uint32_t) t;
        tokens_.push_back(t);
        const int32_t e = n + 1; // the γ-gram ending here
        int32_t prev = -1;
        if (e >= gamma_) {
            entry & en = table_[hash_];
            prev = en.last;
            if (en.first < 0) en.first = e;
            en.last = e;
        }
        prev_.push_back(prev);
    }
}

bool copy_index::same_gram(int32_t e1, int32_t e2) const {
    return std::equal(tokens_.begin() + (e1 - gamma_), tokens_.begin() + e1, tokens_.begin() + (e2 - gamma_));
}

int32_t copy_index::recent_match() const {
    const int32_t L = size();
    if (L < gamma_ + 1) return -1;
    const int32_t e = prev_[L]; // the tail's own γ-gram ends at L: the one before it
    return e >= 0 && same_gram(e, L) ? e : -1;
}

int32_t copy_index::first_match() const {
    const int32_t L = size();
    if (L < gamma_ + 1) return -1;
    const auto it = table_.find(hash_);
    if (it == table_.end() || it->second.first >= L) return -1;
    const int32_t e = it->second.first;
    return same_gram(e, L) ? e : -1;
}

std::vector<int32_t> copy_index::matches(int32_t max) const {
    std::vector<int32_t> out;
    const int32_t L = size();
    if (L < gamma_ + 1) return out;
    for (int32_t e = prev_[L]; e >= 0 && (int32_t) out.size() < max; e = prev_[e]) {
        if (same_gram(e, L)) out.push_back(e);
    }
    return out;
}

std::vector<int32_t> copy_sources(const copy_index & index, const copy_params & params) {
    switch (params.match) {
        case COPY_MATCH_FIRST: {
            const int32_t e = index.first_match();
            return e < 0 ? std::vector<int32_t>{} : std::vector<int32_t>{e};
        }
        case COPY_MATCH_RECENT: {
            const int32_t e = index.recent_match();
            return e < 0 ? std::vector<int32_t>{} : std::vector<int32_t>{e};
        }
        case COPY_MATCH_BRANCHES: {
            // distinct continuations only: a branch that repeats another's first token adds nothing.
            // The chain is walked at most 64 deep, so a step stays O(1) in the context's length.
            std::vector<int32_t> out;
            const token_vec & t = index.tokens();
            for (int32_t e : index.matches(64)) {
                const bool dup = std::any_of(out.begin(), out.end(), [&](int32_t o) { return t[o] == t[e]; });
                if (!dup) out.push_back(e);
                if ((int32_t) out.size() >= params.n_branches) break;
            }
            return out;
        }
    }
    return {};
}

// ----------------------------------------------------------------------------

copy_drafter::copy_drafter(const copy_params & params) : params(params), index_(params.gamma) {}

const char * copy_drafter::name() const {
    if (params.extend) return "copy-ext";
    switch (params.match) {
        case COPY_MATCH_RECENT:   return "copy-recent";
        case COPY_MATCH_BRANCHES: return "copy-tree";
        default:                  return "copy";
    }
}

void copy_drafter::begin(std::span<const llama_token> prompt) {
    index_ = copy_index(params.gamma);
    index_.append(prompt);
    follow_ = -1;
    streak_ = 0;
    proposed_ = false;
}

void copy_drafter::sync(std::span<const llama_token> history) {
    // within a request the history only grows: checking its length and the last indexed token keeps the
    // step O(1) (a whole comparison would grow with the context)
    const size_t n = (size_t) index_.size();
    if (history.size() < n || (n > 0 && history[n - 1] != index_.tokens()[n - 1])) {
        begin(history); // another sequence than the one indexed (not within one request)
        return;
    }
    index_.append(history.subspan(n));
}

void copy_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    proposed_ = false;
    sync(history);
    if (budget <= 0) {
        return;
    }
    std::vector<int32_t> sources;
    int32_t n_copy = params.n_copy;
    if (params.extend && follow_ >= 0 && streak_ > 0) {
        sources = {follow_}; // the output follows this source: go on copying it, longer each time
        n_copy = (int32_t) std::min<int64_t>((int64_t) params.n_copy << std::min(streak_, 16), params.n_copy_max);
    } else {
        sources = copy_sources(index_, params);
    }
    follow_ = -1;
    if (sources.empty()) {
        streak_ = 0;
        return;
    }
    const token_vec & t = index_.tokens();
    const int32_t L = index_.size();
    const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    const uint8_t conf = (uint8_t) std::min(1 + streak_, DRAFT_CONF_COUNT - 1);
    for (int32_t e : sources) {
        const int32_t end = std::min(L, e + n_copy);
        if (end <= e) continue;
        tree.add_path(-1, std::span<const llama_token>(t.data() + e, (size_t) (end - e)), DRAFT_SOURCE_COPY,
                      max_nodes, conf);
    }
    follow_ = sources[0];
    proposed_ = true;
}

void copy_drafter::accept(std::span<const llama_token> accepted) {
    // did the output follow the first source? (the committed tokens are not indexed yet: compare
    // with what the index holds, which may end inside the copy when it ran into the tail)
    if (follow_ < 0) {
        streak_ = 0;
        return;
    }
    const token_vec & t = index_.tokens();
    size_t i = 0;
    while (i < accepted.size() && follow_ + (int64_t) i < (int64_t) t.size() && t[follow_ + i] == accepted[i]) {
        i++;
    }
    if (i == accepted.size()) {
        follow_ += (int32_t) i;
        streak_++;
    } else {
        follow_ = -1;
        streak_ = 0;
    }
}

// ----------------------------------------------------------------------------

void copy_fallback_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    first_->propose(history, tree, budget);
    if (!first_->proposed()) {
        second_->propose(history, tree, budget); // no match: the draft model's τ2 tokens
    }
}

// the table's rows (drafters.h): the paper's rule and its variants, and CopySpec with a draft model
namespace {

copy_params copy_params_for(const std::string & name) {
    copy_params cp;
    if (name == "copy-recent") cp.match = COPY_MATCH_RECENT;
    if (name == "copy-tree") cp.match = COPY_MATCH_BRANCHES;
    if (name == "copy-ext") cp.extend = true;
    return cp;
}

copy_params copy_params_for(const std::string & name, const method_settings & s) {
    copy_params cp = copy_params_for(name);
    cp.gamma = s.copy_gamma;
    cp.n_copy = s.copy_len;
    return cp;
}

std::unique_ptr<drafter_i> make_copy(const drafter_desc & self, const drafter_inputs & in, std::string *) {
    return std::make_unique<copy_drafter>(copy_params_for(self.name, in.settings));
}

} // namespace

std::span<const drafter_desc> copy_drafters() {
    static const drafter_desc rows[] = {
        // auto's third: lookup-longest+copy ran 2.69x over ar, copy+lookup-longest 2.49x (shipped models,
        // CanItEdit edits, docs/results/issue38-auto)
        {"copy", "CopySpec: the tokens after the first earlier occurrence of the last 3 tokens, 10 at a time", 0,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_copy, 3},
        {"copy-recent", "CopySpec from the latest occurrence", 0, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_copy},
        {"copy-tree", "CopySpec from up to 4 occurrences, one branch each", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE, make_copy},
        {"copy-ext", "CopySpec following its source while the output does, doubling the copy", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE, make_copy},
        {"copyspec", "CopySpec with a draft model (§3.3): copy where the last 3 tokens match, else the draft model",
         DRAFTER_NEEDS_DRAFT_MODEL, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE,
         [](const drafter_desc & self, const drafter_inputs & in, std::string * error) -> std::unique_ptr<drafter_i> {
             auto sd = model_drafter_create(*in.target, *in.draft_model, in.draft_params, error, in.draft_ctx, in.draft_kept);
             if (!sd) {
                 if (error) *error = std::string(self.name) + ": " + *error;
                 return nullptr;
             }
             return std::make_unique<copy_fallback_drafter>(
                 std::make_unique<copy_drafter>(copy_params_for("copy", in.settings)), std::move(sd));
         }},
    };
    return rows;
}

} // namespace editspec
