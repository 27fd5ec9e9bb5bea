// Acceptance policies: dispatch, the tree walk they share, and top-k selection.
// The policies themselves: greedy.cpp, sampling.cpp, topk.cpp, entropy.cpp, direct.cpp.
#include "editspec/verify.h"
#include "editspec/log.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace editspec {

const char * verify_policy_name(verify_policy policy) {
    switch (policy) {
        case VERIFY_POLICY_GREEDY:   return "greedy";
        case VERIFY_POLICY_SAMPLING: return "sampling";
        case VERIFY_POLICY_TOPK:     return "topk";
        case VERIFY_POLICY_ENTROPY:  return "entropy";
        case VERIFY_POLICY_DIRECT:   return "direct";
    }
    return "unknown";
}

bool verify_policy_from_name(const std::string & name, verify_policy * out) {
    static const verify_policy all[] = {
        VERIFY_POLICY_GREEDY, VERIFY_POLICY_SAMPLING, VERIFY_POLICY_TOPK, VERIFY_POLICY_ENTROPY, VERIFY_POLICY_DIRECT,
    };
    for (verify_policy v : all) {
        if (name == verify_policy_name(v)) {
            *out = v;
            return true;
        }
    }
    return false;
}

bool verify_policy_is_lossy(verify_policy policy) {
    return policy == VERIFY_POLICY_TOPK || policy == VERIFY_POLICY_ENTROPY || policy == VERIFY_POLICY_DIRECT;
}

static bool verify_debug() {
    static const bool on = [] {
        const char * e = std::getenv("EDITSPEC_VERIFY_DEBUG");
        return e != nullptr && std::strcmp(e, "0") != 0 && e[0] != '\0';
    }();
    return on;
}

static void verify_check_input(const verify_input & in) {
    ES_ASSERT(in.tree != nullptr);
    ES_ASSERT(in.n_vocab > 0);
    ES_ASSERT(in.root_logits != nullptr || in.root_argmax >= 0);
    ES_ASSERT((int32_t) in.node_logits.size() == in.tree->size() || (int32_t) in.node_argmax.size() == in.tree->size());
    ES_ASSERT(in.lossy_ok.empty() || (int32_t) in.lossy_ok.size() == in.tree->size());
}

verify_result verify_tree(const verify_input & in, const verify_params & p, rng_state & rng) {
    verify_result r;
    if (p.forced) {
        return verify_forced_path(*in.tree, *p.forced, in.n_out);
    }
    verify_check_input(in);
    switch (p.policy) {
        case VERIFY_POLICY_GREEDY:   r = verify_greedy(in);                  break;
        case VERIFY_POLICY_SAMPLING: r = verify_sampling(in, p.sampling, rng); break;
        case VERIFY_POLICY_TOPK:     r = verify_topk(in, p, rng);            break;
        case VERIFY_POLICY_ENTROPY:  r = verify_entropy(in, p, rng);         break;
        case VERIFY_POLICY_DIRECT:   r = verify_direct(in, p.sampling, rng); break;
        default:
            ES_LOG_ERROR("%s: unknown policy %d, verifying greedily\n", __func__, (int) p.policy);
            r = verify_greedy(in);
            break;
    }
    if (verify_debug()) {
        std::string path;
        for (int32_t i : r.accepted) {
            char buf[32];
            snprintf(buf, sizeof(buf), " %d@%d", in.tree->nodes[i].token, i);
            path += buf;
        }
        ES_LOG_INFO("verify: %s, %d nodes: accepted [%s ] (%d lossy), %s %d\n", verify_policy_name(p.policy),
                    in.tree->size(), path.c_str(), r.n_lossy, r.recovered ? "recovered" : "bonus", r.token);
    }
    return r;
}

// ----------------------------------------------------------------------------
// The shared walk

// children of every node in compressed form: the children of node i (-1 = root) are
// idx[off[i + 1] .. off[i + 2]), in tree order
struct verify_children {
    std::vector<int32_t> off; // [n_nodes + 2]
    std::vector<int32_t> idx; // [n_nodes]

    explicit verify_children(const draft_tree & tree) {
        const int32_t n = tree.size();
        off.assign(n + 2, 0);
        for (int32_t i = 0; i < n; i++) {
            const int32_t parent = tree.nodes[i].parent;
            ES_ASSERT(parent >= -1 && parent < i); // parents precede children
            off[parent + 2]++;
        }
        for (int32_t i = 1; i < n + 2; i++) {
            off[i] += off[i - 1];
        }
        idx.resize(n);
        std::vector<int32_t> fill(off.begin(), off.end() - 1);
        for (int32_t i = 0; i < n; i++) {
            idx[fill[tree.nodes[i].parent + 1]++] = i;
        }
    }

    std::span<const int32_t> of(int32_t node) const {
        return std::span<const int32_t>(idx.data() + off[node + 1], idx.data() + off[node + 2]);
    }
};

// the lossy rule's pick among the children it may judge (verify_input::lossy_ok), or -1
static int32_t lossy_pick(const verify_input & in, const verify_rule & rule, const float * logits,
                          std::span<const int32_t> kids, std::vector<int32_t> & judged, verify_result & r) {
    if (!rule) return -1;
    judged.clear();
    for (int32_t c : kids) {
        if (in.lossy_ok.empty() || in.lossy_ok[c]) judged.push_back(c);
    }
    if (judged.empty()) return -1;
    const int32_t c = rule(logits, judged);
    if (c >= 0) r.n_lossy++;
    return c;
}

verify_result verify_walk(const verify_input & in, const sampling_params & sp, rng_state & rng,
                          const verify_rule & rule, bool rule_first) {
    verify_check_input(in);
    const draft_tree & tree = *in.tree;
    const verify_children children(tree);
    const bool greedy = sp.temp <= 0.0f;

    verify_result r;
    std::vector<int32_t> lossy_kids;
    // constrained greedy: the output to the current node (the output so far, the accepted path)
    ES_ASSERT(!in.constraint || (greedy && !rule));
    std::vector<llama_token> path;
    if (in.constraint) path.assign(in.out.begin(), in.out.end());
    int32_t node = -1; // -1 = the root (the last committed token)
    while (true) {
        const float * logits = node < 0 ? in.root_logits : in.node_logits.empty() ? nullptr : in.node_logits[node];
        // the decode's argmax outputs stand for the logits of greedy verification without a constraint
        const llama_token known = logits                ? -1
                                : node < 0              ? in.root_argmax
                                : in.node_argmax.empty() ? -1
                                                         : in.node_argmax[node];
        ES_ASSERT(logits != nullptr || (known >= 0 && greedy && !in.constraint && !rule));
        const std::span<const int32_t> kids = children.of(node);

        if (kids.empty()) {
            // nothing left to check: the bonus token, from the target's probabilities only
            r.token     = known >= 0 ? known
                        : greedy     ? verify_greedy_token(in, logits, path)
                                     : verify_target(logits, in.n_vocab, sp).draw(rng.coin());
            r.recovered = false;
            return r;
        }

        int32_t next = rule_first ? lossy_pick(in, rule, logits, kids, lossy_kids, r) : -1;

        // the lossless rule; its state gives the recovered token if nothing is accepted
        llama_token target_argmax = -1;
        std::optional<verify_target> target;
        if (next < 0) {
            if (known >= 0) {
                target_argmax = known;
                next = verify_greedy_child(in, kids, known);
            } else if (greedy) {
                next = verify_greedy_step(in, logits, kids, &target_argmax, path);
            } else {
                target.emplace(logits, in.n_vocab, sp);
                next = verify_sampling_step(in, kids, *target, rng);
            }
        }

        if (next < 0 && !rule_first) {
            next = lossy_pick(in, rule, logits, kids, lossy_kids, r);
        }

        if (next >= 0) {
            ES_ASSERT(tree.nodes[next].parent == node);
            r.accepted.push_back(next);
            if (in.constraint) path.push_back(tree.nodes[next].token);
            node = next;
            continue;
        }

        // every draft here was rejected: the recovered token, from the residual
        r.token     = greedy ? target_argmax : target->draw(rng.coin());
        r.recovered = true;
        return r;
    }
}

// ----------------------------------------------------------------------------
// Top-k selection

std::vector<token_logit> verify_top_logits(const float * logits, int32_t n_vocab, int32_t k) {
    k = std::min(k, n_vocab);
    std::vector<token_logit> top;
    if (k <= 0) {
        return top;
    }
    top.reserve(k + 1);
    // a sorted buffer of the best k so far; scanning ids upward, a token enters only with a
    // strictly larger logit than the k-th, so ties keep the lowest id
    for (int32_t t = 0; t < n_vocab; t++) {
        const float l = logits[t];
        if ((int32_t) top.size() == k && !(l > top.back().logit)) {
            continue;
        }
        int32_t pos = (int32_t) top.size();
        while (pos > 0 && l > top[pos - 1].logit) {
            pos--;
        }
        if (pos == (int32_t) top.size() && (int32_t) top.size() == k) {
            continue; // NaN
        }
        top.insert(top.begin() + pos, {t, l});
        if ((int32_t) top.size() > k) {
            top.pop_back();
        }
    }
    return top;
}

} // namespace editspec
