// A hand-made draft tree with the target's logits at the root and after every node, for the tests of
// the verification policies (src/verify): one helper instead of one copy per policy's test file.
#pragma once

#include "editspec/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace editspec::test {

// logits over n_vocab whose argmax is t (all others 0, t at 5)
inline std::vector<float> peak(int32_t n_vocab, llama_token t) {
    std::vector<float> l(n_vocab, 0.0f);
    l[t] = 5.0f;
    return l;
}

struct verify_case {
    std::vector<float>              root;
    draft_tree                      tree;
    std::vector<std::vector<float>> node;     // [n_nodes] the target's logits after each node
    std::vector<uint8_t>            lossy_ok; // [n_nodes] or empty
    draft_source                    source = DRAFT_SOURCE_MODEL;

    // appends a node directly (no merging, so duplicates are possible); returns its index
    int32_t add(int32_t parent, llama_token token, std::vector<float> logits, uint8_t lossy = 1) {
        tree.nodes.push_back({token, parent, source});
        node.push_back(std::move(logits));
        lossy_ok.push_back(lossy);
        return tree.size() - 1;
    }

    // ... whose target then wants next_argmax (logits peak(next_argmax) over the root's vocabulary)
    int32_t add(int32_t parent, llama_token token, llama_token next_argmax, uint8_t lossy = 1) {
        return add(parent, token, peak((int32_t) root.size(), next_argmax), lossy);
    }

    verify_input input() const {
        verify_input in;
        in.tree        = &tree;
        in.n_vocab     = (int32_t) root.size();
        in.root_logits = root.data();
        for (const auto & l : node) {
            in.node_logits.push_back(l.data());
        }
        in.lossy_ok = lossy_ok;
        return in;
    }

    verify_result run(const verify_params & p, uint64_t seed = 1) const {
        rng_state rng(seed);
        return verify_tree(input(), p, rng);
    }

    verify_result run(verify_policy policy) const {
        verify_params p;
        p.policy = policy;
        return run(p);
    }
};

// the verdict: the accepted node path, the token after it and whether that token replaced a rejected draft
inline void expect_verdict(const verify_result & r, const std::vector<int32_t> & accepted, llama_token token, bool recovered) {
    EXPECT_EQ(r.accepted, accepted);
    EXPECT_EQ(r.token, token);
    EXPECT_EQ(r.recovered, recovered);
}

} // namespace editspec::test
