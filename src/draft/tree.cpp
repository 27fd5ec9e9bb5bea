// Draft tree: candidates of several drafters merged on shared prefixes.
#include "editspec/draft.h"
#include "editspec/log.h"

#include <algorithm>

namespace editspec {

const char * draft_source_name(uint8_t source) {
    switch (source) {
        case DRAFT_SOURCE_LOOKUP:    return "lookup";
        case DRAFT_SOURCE_REUSE:     return "reuse";
        case DRAFT_SOURCE_COPY:      return "copy";
        case DRAFT_SOURCE_RETRIEVAL: return "retrieval";
        case DRAFT_SOURCE_MODEL:     return "model";
        case DRAFT_SOURCE_TEST:      return "test";
        default:                     return "unknown";
    }
}

int32_t draft_tree::find_child(int32_t parent, llama_token token) const {
    // children always follow their parent, so start the scan there
    for (int32_t i = parent + 1; i < (int32_t) nodes.size(); i++) {
        if (nodes[i].parent == parent && nodes[i].token == token) {
            return i;
        }
    }
    return -1;
}

bool draft_sources_independent(uint8_t a, uint8_t b) {
    auto reads_context = [](uint8_t s) { return s == DRAFT_SOURCE_LOOKUP || s == DRAFT_SOURCE_COPY; };
    return a != b && !(reads_context(a) && reads_context(b));
}

draft_tree draft_tree::kept(const std::vector<bool> & keep) const {
    draft_tree out;
    std::vector<int32_t> remap(size(), -1);
    for (int32_t i = 0; i < size(); i++) {
        if (!keep[i]) continue;
        draft_node nd = nodes[i];
        if (nd.parent >= 0) {
            ES_ASSERT(remap[nd.parent] >= 0); // kept sets are closed under parents
            nd.parent = remap[nd.parent];
        }
        remap[i] = out.size();
        out.nodes.push_back(nd);
    }
    return out;
}

int32_t draft_tree::add(int32_t parent, llama_token token, uint8_t source, uint8_t conf) {
    const int32_t c = find_child(parent, token);
    if (c >= 0) {
        nodes[c].agreed |= draft_sources_independent(nodes[c].source, source);
        nodes[c].proposers |= (uint8_t) (1u << source);
        return c;
    }
    nodes.push_back({token, parent, source, conf, 0, (uint8_t) (1u << source)});
    return (int32_t) nodes.size() - 1;
}

int32_t draft_tree::add_path(int32_t parent, std::span<const llama_token> tokens, uint8_t source, int32_t max_nodes,
                             uint8_t conf) {
    int32_t cur = parent;
    for (size_t i = 0; i < tokens.size(); i++) {
        const int32_t c = find_child(cur, tokens[i]);
        if (c >= 0) {
            nodes[c].agreed |= draft_sources_independent(nodes[c].source, source);
            nodes[c].proposers |= (uint8_t) (1u << source);
            cur = c;
            continue;
        }
        if ((int32_t) nodes.size() >= max_nodes) {
            break;
        }
        nodes.push_back({tokens[i], cur, source, conf, 0, (uint8_t) (1u << source)});
        cur = (int32_t) nodes.size() - 1;
    }
    return cur;
}

int32_t draft_tree::depth(int32_t i) const {
    int32_t d = 0;
    for (; i >= 0; i = nodes[i].parent) {
        d++;
    }
    return d;
}

std::vector<int32_t> draft_tree::depths() const {
    std::vector<int32_t> d(nodes.size());
    for (size_t i = 0; i < nodes.size(); i++) {
        d[i] = nodes[i].parent < 0 ? 1 : d[nodes[i].parent] + 1;
    }
    return d;
}

int32_t draft_tree::max_depth() const {
    const std::vector<int32_t> d = depths();
    return d.empty() ? 0 : *std::max_element(d.begin(), d.end());
}

std::vector<llama_token> draft_tree::path_to(int32_t i) const {
    std::vector<llama_token> out;
    for (; i >= 0; i = nodes[i].parent) {
        out.push_back(nodes[i].token);
    }
    return std::vector<llama_token>(out.rbegin(), out.rend());
}

std::vector<int32_t> draft_tree::leaves() const {
    std::vector<bool> has_child(nodes.size(), false);
    for (const draft_node & n : nodes) {
        if (n.parent >= 0) {
            has_child[n.parent] = true;
        }
    }
    std::vector<int32_t> out;
    for (int32_t i = 0; i < (int32_t) nodes.size(); i++) {
        if (!has_child[i]) {
            out.push_back(i);
        }
    }
    return out;
}

bool draft_backoff::skip() {
    if (wait <= 0) {
        return false;
    }
    wait--;
    return true;
}

void draft_backoff::sized(const draft_tree & sent, uint8_t source) {
    if (!pending) {
        return;
    }
    pending = false;
    bool kept = false;
    for (const draft_node & nd : sent.nodes) kept = kept || nd.source == source;
    step = kept ? 0 : std::min(32, std::max(1, 2 * step));
    wait = step;
}

} // namespace editspec
