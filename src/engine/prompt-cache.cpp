// The prompt cache (prompt-cache.h): the exact common prefix, and PIE's shifted spans (seed 001).
//
// ref: "Positional Integrity Encoding" §3 (delete the edited span, re-rotate the later keys, encode
// only the new tokens); llama.cpp's K-shift (llama_memory_seq_add); its server's --cache-reuse, which
// shifts chunks of the cache too but only skips deleted tokens (an insertion ends its walk)
#include "editspec/prompt-cache.h"
#include "editspec/log.h"

#include <algorithm>
#include <unordered_map>

namespace editspec {

const char * kv_reuse_name(kv_reuse_mode m) {
    return m == KV_REUSE_PIE ? "pie" : "prefix";
}

bool kv_reuse_parse(const std::string & name, kv_reuse_mode & out) {
    if (name == "prefix") out = KV_REUSE_PREFIX;
    else if (name == "pie") out = KV_REUSE_PIE;
    else return false;
    return true;
}

int32_t prompt_reuse_plan::n_shifted() const {
    int32_t n = 0;
    for (const prompt_reuse_block & b : blocks) n += b.n;
    return n;
}

namespace {

// spans are found by a K-token key, then extended as far as they match
constexpr int32_t KEY = 8;
// candidate positions tried per key: repeated lines (blank lines, "return None") share keys
constexpr int32_t MAX_CANDIDATES = 16;

uint64_t key_hash(const llama_token * t) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < KEY; i++) h = (h ^ (uint32_t) t[i]) * 1099511628211ull;
    return h;
}

// The monotone spans of at least min_block tokens shared by cached[p..) and prompt[p..), greedily
// left to right: at each prompt position the earliest cached occurrence after the previous span
// that matches for min_block tokens or more.
std::vector<prompt_reuse_block> match_spans(std::span<const llama_token> cached, std::span<const llama_token> prompt,
                                            int32_t p, int32_t min_block) {
    std::vector<prompt_reuse_block> out;
    const int32_t nc = (int32_t) cached.size(), np = (int32_t) prompt.size();
    if (nc - p < min_block || np - p < min_block) return out;
    std::unordered_map<uint64_t, std::vector<int32_t>> at; // key -> cached positions, ascending
    for (int32_t c = p; c + KEY <= nc; c++) at[key_hash(&cached[c])].push_back(c);
    int32_t head_c = p;
    for (int32_t t = p; t + min_block <= np;) {
        int32_t best_c = -1, best_n = 0;
        auto it = at.find(key_hash(&prompt[t]));
        if (it != at.end()) {
            const std::vector<int32_t> & cs = it->second;
            int32_t tried = 0;
            for (auto c = std::lower_bound(cs.begin(), cs.end(), head_c); c != cs.end() && tried < MAX_CANDIDATES; ++c, tried++) {
                int32_t n = 0;
                while (*c + n < nc && t + n < np && cached[*c + n] == prompt[t + n]) n++;
                if (n > best_n) best_c = *c, best_n = n;
            }
        }
        if (best_n >= min_block) {
            out.push_back({best_c, t, best_n});
            head_c = best_c + best_n;
            t += best_n;
        } else {
            t++;
        }
    }
    return out;
}

} // namespace

prompt_reuse_plan prompt_reuse_plan_make(std::span<const llama_token> cached, std::span<const uint8_t> stale,
                                         std::span<const llama_token> prompt, const prompt_cache_params & p) {
    prompt_reuse_plan plan;
    int32_t n = 0;
    while (n < (int32_t) cached.size() && n < (int32_t) prompt.size() && cached[n] == prompt[n]) n++;
    plan.n_prefix = n;
    if (p.mode == KV_REUSE_PIE) plan.blocks = match_spans(cached, prompt, n, std::max(p.min_block, KEY));
    if (p.drift_max >= 0) {
        const bool marked = stale.size() == cached.size();
        int32_t stale_prefix = 0;
        for (int32_t i = 0; marked && i < plan.n_prefix; i++) stale_prefix += stale[i] ? 1 : 0;
        if (stale_prefix + plan.n_shifted() > p.drift_max) plan.blocks.clear();
        if (stale_prefix > p.drift_max) {
            plan.n_prefix = (int32_t) (std::find(stale.begin(), stale.begin() + plan.n_prefix, (uint8_t) 1) - stale.begin());
        }
    }
    return plan;
}

bool context_prefill_cached(context & ctx, batch & b, std::span<const llama_token> tokens, const prompt_cache_params & pc,
                            prefill_stats * st) {
    prompt_cache_params p = pc;
    if (p.mode == KV_REUSE_PIE && (!ctx.can_shift() || ctx.n_seq_max() < 2)) p.mode = KV_REUSE_PREFIX;
    const token_vec cached = ctx.cached_prompt();
    const std::vector<uint8_t> old_stale = ctx.cached_stale();
    const prompt_reuse_plan plan = prompt_reuse_plan_make(cached, old_stale, tokens, p);
    const int32_t n = (int32_t) tokens.size();
    const auto fail = [&] {
        ctx.kv_clear();
        return false;
    };

    // only sequence 0 stays, and of it the prefix and the spans
    ctx.kv_keep(0);
    int32_t from = plan.n_prefix;
    for (const prompt_reuse_block & blk : plan.blocks) {
        if (blk.from > from) ctx.kv_rm(0, from, blk.from);
        from = blk.from + blk.n;
    }
    ctx.kv_rm(0, from, -1);
    // each span to its place: a span moving left cannot land on a later one and one moving right
    // cannot land on an earlier one, so the left movers go first to last, the right movers last to first
    for (const prompt_reuse_block & blk : plan.blocks) {
        if (blk.to < blk.from) ctx.kv_add(0, blk.from, blk.from + blk.n, blk.to - blk.from);
    }
    for (auto it = plan.blocks.rbegin(); it != plan.blocks.rend(); ++it) {
        if (it->to > it->from) ctx.kv_add(0, it->from, it->from + it->n, it->to - it->from);
    }

    // the gaps between spans: a gap before a span goes in through sequence 1, which holds everything
    // before it (a sequence's new positions must follow its last one); the last gap goes straight in
    std::vector<uint8_t> stale(n, 0);
    for (int32_t i = 0; i < plan.n_prefix; i++) stale[i] = i < (int32_t) old_stale.size() ? old_stale[i] : 0;
    int32_t at = plan.n_prefix;
    for (size_t k = 0; k <= plan.blocks.size(); k++) {
        const int32_t end = k < plan.blocks.size() ? plan.blocks[k].to : n;
        if (end > at) {
            const auto gap = tokens.subspan(at, end - at);
            if (k < plan.blocks.size()) {
                ctx.kv_rm(1, -1, -1);
                ctx.kv_cp(0, 1, 0, at);
                if (!context_prefill(ctx, b, gap, at, 1)) return fail();
                ctx.kv_cp(1, 0, at, end);
                ctx.kv_rm(1, -1, -1);
            } else if (!context_prefill(ctx, b, gap, at, 0)) {
                return fail();
            }
        }
        if (k < plan.blocks.size()) {
            const prompt_reuse_block & blk = plan.blocks[k];
            std::fill(stale.begin() + blk.to, stale.begin() + blk.to + blk.n, (uint8_t) 1);
            at = blk.to + blk.n;
        }
    }
    ctx.set_cached_prompt(tokens, stale);
    if (st) {
        st->cached = plan.n_prefix;
        st->shifted = plan.n_shifted();
        st->encoded = n - plan.n_prefix - st->shifted;
        st->stale = (int32_t) std::count(stale.begin(), stale.end(), (uint8_t) 1);
    }
    if (!plan.blocks.empty()) {
        ES_LOG_DEBUG("prompt cache: %d tokens kept, %d shifted in %zu spans, %d encoded\n", plan.n_prefix, plan.n_shifted(),
                     plan.blocks.size(), n - plan.n_prefix - plan.n_shifted());
    }
    return true;
}

} // namespace editspec
