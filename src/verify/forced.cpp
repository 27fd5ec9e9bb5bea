// Forced choices: the target's token at each output position is given (replay benchmarks on
// random-weight models, where the model's own choices would be noise); drafts are accepted where
// they carry it. The passes themselves are real, so their time is.
#include "editspec/verify.h"

namespace editspec {

verify_result verify_forced_path(const draft_tree & tree, const verify_forced & f, size_t n_out) {
    verify_result r;
    int32_t cur = -1;
    for (size_t pos = n_out;; pos++) {
        const llama_token want = f.at(pos);
        const int32_t c = want == LLAMA_TOKEN_NULL ? -1 : tree.find_child(cur, want);
        if (c < 0) {
            r.token = want;
            for (const draft_node & nd : tree.nodes) {
                r.recovered = r.recovered || nd.parent == cur;
            }
            return r;
        }
        r.accepted.push_back(c);
        cur = c;
    }
}

} // namespace editspec
