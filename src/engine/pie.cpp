// PIE (pie.h): the exact common prefix, and PIE's shifted spans (He et al., "Let the Code LLM Edit
// Itself When You Edit the Code"), for requests that reuse a cache and for document sessions.
//
// ref: "Positional Integrity Encoding" §3 (delete the edited span, re-rotate the later keys, encode
// only the new tokens); llama.cpp's K-shift (llama_memory_seq_add); its server's --cache-reuse, which
// shifts chunks of the cache too but only skips deleted tokens (an insertion ends its walk)
#include "editspec/pie.h"
#include "editspec/log.h"
#include "editspec/names.h"

#include <algorithm>
#include <unordered_map>

namespace editspec {

// "recompute": a session's name for the exact mode, the paper's
static constexpr named<kv_reuse_mode> MODES[] = {
    {KV_REUSE_PREFIX, "prefix"}, {KV_REUSE_PREFIX, "recompute"}, {KV_REUSE_PIE, "pie"}, {KV_REUSE_CONFLICT, "conflict"}};

const char * kv_reuse_name(kv_reuse_mode m) { return name_of(MODES, m); }
bool kv_reuse_parse(const std::string & name, kv_reuse_mode & out) { return name_parse(MODES, name, out); }
std::string kv_reuse_names() { return names_list(MODES); }

int32_t prompt_reuse_plan::n_shifted() const {
    int32_t n = 0;
    for (const prompt_reuse_block & b : blocks) n += b.n;
    return n;
}

namespace {

// spans are found by a K-token key, then extended as far as they match
constexpr int32_t KEY = 8;
// cached positions tried per key: repeated lines (blank lines, "return None") share keys
constexpr int32_t MAX_CANDIDATES = 16;
// candidates chained (quadratic in their count): past this many the shortest go
constexpr size_t MAX_SPANS = 2048;

uint64_t key_hash(const llama_token * t) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < KEY; i++) h = (h ^ (uint32_t) t[i]) * 1099511628211ull;
    return h;
}

// The spans of at least min_block tokens shared by cached[p..) and prompt[p..) that keep their order
// in both and cover the most tokens. Candidates are the maximal matches found through K-token keys;
// the best chain of them is a longest-path over candidates sorted by prompt position. (A greedy walk
// would take an apply's snippet, whose lines also occur in the cached file, and lose the file after it.)
std::vector<prompt_reuse_block> match_spans(std::span<const llama_token> cached, std::span<const llama_token> prompt,
                                            int32_t p, int32_t min_block) {
    std::vector<prompt_reuse_block> cands;
    const int32_t nc = (int32_t) cached.size(), np = (int32_t) prompt.size();
    if (nc - p < min_block || np - p < min_block) return {};
    std::unordered_map<uint64_t, std::vector<int32_t>> at; // key -> cached positions, ascending
    for (int32_t c = p; c + KEY <= nc; c++) at[key_hash(&cached[c])].push_back(c);
    for (int32_t t = p; t + min_block <= np; t++) {
        auto it = at.find(key_hash(&prompt[t]));
        if (it == at.end()) continue;
        int32_t tried = 0;
        for (int32_t c : it->second) {
            if (tried++ >= MAX_CANDIDATES) break;
            // only maximal matches: one that continues the match at t - 1 was found there
            if (t > p && c > p && cached[c - 1] == prompt[t - 1]) continue;
            int32_t n = 0;
            while (c + n < nc && t + n < np && cached[c + n] == prompt[t + n]) n++;
            if (n >= min_block) cands.push_back({c, t, n});
        }
    }
    if (cands.empty()) return {};
    if (cands.size() > MAX_SPANS) {
        std::nth_element(cands.begin(), cands.begin() + MAX_SPANS, cands.end(),
                         [](const prompt_reuse_block & a, const prompt_reuse_block & b) { return a.n > b.n; });
        cands.resize(MAX_SPANS);
    }
    // best[i]: the most tokens a chain ending with candidate i covers (candidates ordered by prompt
    // position; a chain's spans are disjoint and ascending in both)
    std::sort(cands.begin(), cands.end(), [](const prompt_reuse_block & a, const prompt_reuse_block & b) {
        return a.to != b.to ? a.to < b.to : a.from < b.from;
    });
    // a chain may cut the head off a span that overlaps the one before it (in either sequence), as long
    // as min_block tokens remain; the span's end, which is what later spans see, stays
    const size_t n = cands.size();
    std::vector<int64_t> best(n);
    std::vector<int32_t> prev(n, -1), cut(n, 0);
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
        const prompt_reuse_block & ci = cands[i];
        best[i] = ci.n;
        for (size_t j = 0; j < i; j++) {
            const prompt_reuse_block & cj = cands[j];
            if (cj.to >= ci.to || cj.from >= ci.from) continue; // j must start before i in both
            const int32_t d = std::max({0, cj.to + cj.n - ci.to, cj.from + cj.n - ci.from});
            if (ci.n - d < min_block) continue;
            if (best[j] + ci.n - d > best[i]) {
                best[i] = best[j] + ci.n - d;
                prev[i] = (int32_t) j;
                cut[i] = d;
            }
        }
        if (best[i] > best[top]) top = i;
    }
    std::vector<prompt_reuse_block> out;
    for (int32_t i = (int32_t) top; i >= 0; i = prev[i]) {
        prompt_reuse_block b = cands[i];
        b.from += cut[i];
        b.to += cut[i];
        b.n -= cut[i];
        out.push_back(b);
    }
    std::reverse(out.begin(), out.end());
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
    if (p.refresh > 0) {
        std::erase_if(plan.blocks, [&](prompt_reuse_block & b) {
            const int32_t cut = std::min(p.refresh, b.n);
            b.from += cut;
            b.to += cut;
            b.n -= cut;
            return b.n < p.min_block;
        });
    }
    const bool marked = stale.size() == cached.size();
    int32_t stale_prefix = 0;
    for (int32_t i = 0; marked && i < plan.n_prefix; i++) stale_prefix += stale[i] ? 1 : 0;
    if (p.drift_max >= 0) {
        if (stale_prefix + plan.n_shifted() > p.drift_max) plan.blocks.clear();
        if (stale_prefix > p.drift_max) {
            plan.n_prefix = (int32_t) (std::find(stale.begin(), stale.begin() + plan.n_prefix, (uint8_t) 1) - stale.begin());
            stale_prefix = 0;
        }
    }
    plan.n_stale = stale_prefix + plan.n_shifted();
    return plan;
}

prompt_cache_params prompt_cache_for(const context & ctx, const prompt_cache_params & pc) {
    prompt_cache_params p = pc;
    if (p.mode == KV_REUSE_CONFLICT) p.mode = KV_REUSE_PREFIX; // a request's cells stay at their positions
    if (p.mode == KV_REUSE_PIE && !ctx.can_shift()) p.mode = KV_REUSE_PREFIX;
    return p;
}

bool pie_apply(context & ctx, batch & b, std::span<const llama_token> tokens, const prompt_reuse_plan & plan,
               std::span<const uint8_t> old_stale, std::vector<uint8_t> & stale) {
    const int32_t n = (int32_t) tokens.size();
    const auto fail = [&] {
        ctx.kv_clear();
        return false;
    };

    // only sequence 0 stays, and of it the prefix and the spans
    ctx.kv_keep(0);
    int32_t from = plan.n_prefix;
    for (const prompt_reuse_block & blk : plan.blocks) {
        if (blk.from > from && !ctx.kv_rm(0, from, blk.from)) return fail();
        from = blk.from + blk.n;
    }
    if (!ctx.kv_rm(0, from, -1)) return fail();
    // each span to its place: a span moving left cannot land on a later one and one moving right
    // cannot land on an earlier one, so the left movers go first to last, the right movers last to first
    for (const prompt_reuse_block & blk : plan.blocks) {
        if (blk.to < blk.from) ctx.kv_add(0, blk.from, blk.from + blk.n, blk.to - blk.from);
    }
    for (auto it = plan.blocks.rbegin(); it != plan.blocks.rend(); ++it) {
        if (it->to > it->from) ctx.kv_add(0, it->from, it->from + it->n, it->to - it->from);
    }

    // the gaps between spans, each at its own positions in sequence 0: the mask is by position, so a
    // gap's tokens attend to what precedes them only, not to the later spans already in place
    // (patches/llama-positions.patch lets a batch go in before a sequence's last position)
    stale.assign(n, 0);
    for (int32_t i = 0; i < plan.n_prefix; i++) stale[i] = i < (int32_t) old_stale.size() ? old_stale[i] : 0;
    int32_t at = plan.n_prefix;
    for (size_t k = 0; k <= plan.blocks.size(); k++) {
        const int32_t end = k < plan.blocks.size() ? plan.blocks[k].to : n;
        if (end > at && !context_prefill(ctx, b, tokens.subspan(at, end - at), at, 0)) return fail();
        if (k < plan.blocks.size()) {
            const prompt_reuse_block & blk = plan.blocks[k];
            std::fill(stale.begin() + blk.to, stale.begin() + blk.to + blk.n, (uint8_t) 1);
            at = blk.to + blk.n;
        }
    }
    return true;
}

bool context_prefill_cached(context & ctx, batch & b, std::span<const llama_token> tokens, const prompt_cache_params & pc,
                            prefill_stats * st) {
    const prompt_cache_params p = prompt_cache_for(ctx, pc);
    const token_vec cached = ctx.cached_prompt();
    const std::vector<uint8_t> old_stale = ctx.cached_stale();
    prompt_reuse_plan plan = prompt_reuse_plan_make(cached, old_stale, tokens, p);
    if (ctx.owner().facts().recurrent && ctx.kv_pos_max(0) != plan.n_prefix - 1) {
        // a recurrent state is the state after all it has read: kept only when that is the prefix (a
        // prompt that goes on from the last one's end), else read again from the start
        plan = prompt_reuse_plan{};
    }
    const int32_t n = (int32_t) tokens.size();
    std::vector<uint8_t> stale;
    if (!pie_apply(ctx, b, tokens, plan, old_stale, stale)) return false;
    ctx.set_cached_prompt(tokens, stale);
    if (st) {
        st->cached = plan.n_prefix;
        st->shifted = plan.n_shifted();
        st->encoded = n - plan.n_prefix - st->shifted;
        st->stale = (int32_t) std::count(stale.begin(), stale.end(), (uint8_t) 1);
    }
    if (!plan.blocks.empty() && log_get_level() <= LOG_LEVEL_DEBUG) {
        std::string spans;
        for (const prompt_reuse_block & blk : plan.blocks) {
            spans += " [" + std::to_string(blk.from) + "->" + std::to_string(blk.to) + " x" + std::to_string(blk.n) + "]";
        }
        ES_LOG_DEBUG("prompt cache: %d of %d cached tokens kept, %d shifted in%s, %d encoded\n", plan.n_prefix,
                     (int) cached.size(), plan.n_shifted(), spans.c_str(), n - plan.n_prefix - plan.n_shifted());
    }
    return true;
}

} // namespace editspec
