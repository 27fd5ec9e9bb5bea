// Constrained apply: the merged file is made of the original's and the snippet's lines (apply.h).
#include "editspec/apply.h"

#include <algorithm>
#include <set>
#include <cctype>

namespace editspec {

static bool starts_with(const std::string & s, const std::string & prefix) {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool apply_is_marker(const std::string & line) {
    const size_t a = line.find_first_not_of(" \t");
    if (a == std::string::npos) return false;
    const std::string s = line.substr(a);
    static const char * comments[] = {"#", "//", "/*", "--", ";", "<!--"};
    bool comment = false;
    for (const char * c : comments) comment = comment || starts_with(s, c);
    if (!comment) return false;
    std::string low(s);
    std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return (char) std::tolower(c); });
    return low.find("...") != std::string::npos || low.find("existing code") != std::string::npos ||
           low.find("unchanged") != std::string::npos || low.find("rest of") != std::string::npos;
}

bool apply_is_fence(const std::string & s, bool partial) {
    if (partial && starts_with("```", s)) return true;
    if (!starts_with(s, "```")) return false;
    size_t end = s.size();
    while (!partial && end > 3 && (s[end - 1] == '\n' || s[end - 1] == '\r')) end--;
    // a tag as long as a language's name: the constraint lets a fence through, and without a bound a
    // model could write a "tag" for ever (a random model did, to the end of n_predict)
    if (end - 3 > APPLY_FENCE_TAG_MAX) return false;
    for (size_t k = 3; k < end; k++) {
        const unsigned char c = (unsigned char) s[k];
        if (!std::isalnum(c) && c != '_' && c != '+' && c != '-' && c != '.') return false;
    }
    return true;
}

// a closing fence is bare ("```" and its newline): a tag belongs to the opening one only, and a tagged
// line there would be kept as the file's last line (apply_merged_code strips a bare closing fence)
static bool closing_fence(const std::string & s, bool partial) {
    size_t end = s.size();
    while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == '\r')) end--;
    if (end < s.size() && end != 3) return false; // a whole line: "```" exactly
    return end <= 3 && std::string("```").compare(0, end, s, 0, end) == 0 && (partial || end == 3);
}

// text's tokens by byte offset (tokenized whole, as Reuse drafts a file); all -1 when the pieces do
// not spell the text
static std::vector<llama_token> tokens_at(const model & m, const std::string & text) {
    std::vector<llama_token> at(text.size() + 1, -1);
    size_t o = 0;
    for (llama_token t : m.tokenize(text, false, false)) {
        const std::string p = m.token_to_piece(t);
        if (p.empty() || text.compare(o, p.size(), p) != 0) return std::vector<llama_token>(text.size() + 1, -1);
        at[o] = t;
        o += p.size();
    }
    return o == text.size() ? at : std::vector<llama_token>(text.size() + 1, -1);
}

apply_constraint::apply_constraint(const model & m, const apply_input & in) : m_(m), al_(apply_align(in)) {
    dropped_before_.assign(al_.code.size() + 1, 0);
    for (size_t i = 0; i < al_.code.size(); i++) dropped_before_[i + 1] = dropped_before_[i] + al_.dropped[i];
    for (int32_t i = 0; i < (int32_t) al_.code.size(); i++) in_code_[al_.code[(size_t) i]].push_back(i);
    for (int32_t j = 0; j < (int32_t) al_.update.size(); j++) in_update_[al_.update[(size_t) j]].push_back(j);
    const size_t n = (size_t) m.facts().n_vocab;
    pieces_.resize(n);
    piece_known_.assign(n, 0);
    states_.push_back(state{{{0, 0}}, "", 0});
    // where al_'s lines stand in the two texts (the snippet's markers and fences are not lines of it)
    own_[0].at = tokens_at(m, in.code);
    own_[1].at = tokens_at(m, in.update);
    int32_t o = 0;
    for (const std::string & l : apply_lines(in.code)) {
        own_[0].line_start.push_back(o);
        o += (int32_t) l.size();
    }
    o = 0;
    for (const std::string & l : apply_lines(in.update)) {
        if (!apply_is_marker(l) && !apply_is_fence(l)) own_[1].line_start.push_back(o);
        o += (int32_t) l.size();
    }
    if (own_[0].line_start.size() != al_.code.size()) own_[0].line_start.assign(al_.code.size(), -1);
    if (own_[1].line_start.size() != al_.update.size()) own_[1].line_start.assign(al_.update.size(), -1);
    // between two of a source's tokens the output may only write tokens that stop at the next one:
    // never a dead end when every byte is a token of its own (byte-level BPE)
    std::set<unsigned char> bytes(in.code.begin(), in.code.end());
    bytes.insert(in.update.begin(), in.update.end());
    realign_ = true;
    for (unsigned char c : bytes) {
        const token_vec t = m.tokenize(std::string(1, (char) c), false, false);
        realign_ = realign_ && t.size() == 1 && m.token_to_piece(t[0]) == std::string(1, (char) c);
    }
}

const std::string & apply_constraint::piece(llama_token t) {
    if (!piece_known_[(size_t) t]) {
        pieces_[(size_t) t] = m_.token_to_piece(t);
        piece_known_[(size_t) t] = 1;
    }
    return pieces_[(size_t) t];
}

// Moves from position p: code line i (skipping only code lines that may go: not kept, and not past
// the next placed line of the snippet) or update line p.j (every line of the snippet is written,
// in its order); an anchored pair is used together. -1 = not a move.
apply_constraint::pos apply_constraint::from_code(pos p, int32_t i) const {
    if (i < p.i || al_.dropped[(size_t) i] || al_.kept_before[(size_t) i] != al_.kept_before[(size_t) p.i]) return {-1, -1};
    // lines skipped: those the snippet deletes, or any after a new line (which replaces them)
    if (!p.skip && dropped_before_[(size_t) i] - dropped_before_[(size_t) p.i] != i - p.i) return {-1, -1};
    const int32_t k = al_.code_anchor[(size_t) i];
    if (k < 0 || k < p.j) return i < al_.next_place[(size_t) p.j] ? pos{i + 1, p.j} : pos{-1, -1};
    if (k != p.j) return {-1, -1};
    return {i + 1, k + 1};
}

apply_constraint::pos apply_constraint::from_update(pos p, int32_t j) const {
    if (j != p.j) return {-1, -1};
    const int32_t a = al_.place[(size_t) j];
    const int32_t skip = al_.anchor[(size_t) j] < 0 ? 1 : 0; // a new or changed line may replace what follows
    if (a < 0) return {p.i, j + 1, skip};
    // a changed line whose guessed place was passed still has to be written (no dead end)
    if (a < p.i) return al_.anchor[(size_t) j] < 0 ? pos{p.i, j + 1, skip} : pos{-1, -1};
    if (al_.kept_before[(size_t) a] != al_.kept_before[(size_t) p.i]) return {-1, -1};
    return {a + 1, j + 1, skip};
}

bool apply_constraint::take_line(const std::string & line, state & st) const {
    if (st.fences == 2) return false; // nothing after the closing fence
    if (apply_is_fence(line)) {
        if (!fence_ok(st) || (st.fences == 1 && !closing_fence(line, false))) return false;
        st.fences++;
        return true;
    }
    st.lines++;
    std::vector<pos> next;
    auto add = [&](pos p) {
        if (p.i < 0) return;
        for (const pos & q : next) {
            if (q.i <= p.i && q.j <= p.j && q.skip >= p.skip) return; // q leaves at least as much to use
        }
        next.erase(std::remove_if(next.begin(), next.end(),
                                  [&](const pos & q) { return p.i <= q.i && p.j <= q.j && p.skip >= q.skip; }),
                   next.end());
        next.push_back(p);
    };
    auto ic = in_code_.find(line);
    auto iu = in_update_.find(line);
    for (const pos & p : st.at) {
        if (ic != in_code_.end()) {
            for (int32_t i : ic->second) add(from_code(p, i));
        }
        if (iu != in_update_.end()) {
            for (int32_t j : iu->second) add(from_update(p, j));
        }
    }
    if (next.empty()) return false;
    st.at = std::move(next);
    return true;
}

bool apply_constraint::prefix_ok(const state & st) const {
    const std::string & p = st.partial;
    if (p.empty()) return true;
    if (st.fences == 2) return false;
    if (fence_ok(st) && (st.fences == 0 ? apply_is_fence(p, true) : closing_fence(p, true))) return true;
    for (const pos & q : st.at) {
        for (int32_t i = q.i; i < (int32_t) al_.code.size(); i++) {
            if (starts_with(al_.code[i], p) && from_code(q, i).i >= 0) return true;
        }
        for (int32_t j = q.j; j < (int32_t) al_.update.size(); j++) {
            if (starts_with(al_.update[j], p) && from_update(q, j).i >= 0) return true;
        }
    }
    return false;
}

bool apply_constraint::extend(const std::string & text, state & st) const {
    st.partial += text;
    size_t start = 0;
    for (size_t nl = st.partial.find('\n'); nl != std::string::npos; nl = st.partial.find('\n', start)) {
        if (!take_line(st.partial.substr(start, nl + 1 - start), st)) return false;
        start = nl + 1;
    }
    st.partial.erase(0, start);
    return prefix_ok(st);
}

bool apply_constraint::complete(const state & st) const {
    for (const pos & q : st.at) {
        if (al_.kept_before[(size_t) q.i] == al_.kept_before.back() && q.j == (int32_t) al_.update.size()) return true;
    }
    return false;
}

// a chat model's fence: opening as the first line, closing once the merge is complete (then only the end)
bool apply_constraint::fence_ok(const state & st) const {
    return (st.fences == 0 && st.lines == 0) || (st.fences == 1 && complete(st));
}

bool apply_constraint::end_ok(const state & st) const {
    if (st.fences == 2) return st.partial.empty();
    state s = st;
    if (!s.partial.empty() && !take_line(s.partial + "\n", s)) return false; // a last line without its newline
    return complete(s);
}

void apply_constraint::determined(state & st) const {
    st.known = 1;
    st.src = -1;
    if (st.fences == 2 || (fence_ok(st) && (st.fences == 0 ? apply_is_fence(st.partial, true) : closing_fence(st.partial, true)))) return;
    const std::string & p = st.partial;
    const std::string * text = nullptr;
    auto see = [&](const std::string & line, int8_t src, int32_t k) {
        if (!text) {
            text = &line;
            st.src = src;
            st.line = k;
            return true;
        }
        return *text == line;
    };
    for (const pos & q : st.at) {
        for (int32_t i = q.i; i < (int32_t) al_.code.size(); i++) {
            if (starts_with(al_.code[(size_t) i], p) && from_code(q, i).i >= 0 && !see(al_.code[(size_t) i], 0, i)) {
                st.src = -1;
                return;
            }
        }
        for (int32_t j = q.j; j < (int32_t) al_.update.size(); j++) {
            if (starts_with(al_.update[(size_t) j], p) && from_update(q, j).i >= 0 && !see(al_.update[(size_t) j], 1, j)) {
                st.src = -1;
                return;
            }
        }
    }
}

int8_t apply_constraint::own_token(const state & st, llama_token t) {
    if (st.src < 0) return -1;
    const source_tokens & s = own_[st.src];
    const int32_t start = s.line_start[(size_t) st.line];
    if (start < 0) return -1;
    // within the line its tokens are the source's; after its last character that is not a blank, they
    // join its blanks and newline to the next line's indent: the source's own only when the next line is
    // the source's next line (else the model decides, as it chooses that line)
    const std::string & line = st.src == 0 ? al_.code[(size_t) st.line] : al_.update[(size_t) st.line];
    const size_t last = line.find_last_not_of(" \t\r\n");
    const size_t end = (size_t) start + (last == std::string::npos ? 0 : last + 1), o = (size_t) start + st.partial.size();
    if (end >= s.at.size()) return -1;
    llama_token own = o < s.at.size() ? s.at[o] : -1;
    size_t next = o + 1; // the source's next token start after o
    while (next < s.at.size() - 1 && s.at[next] < 0) next++;
    size_t stop = end;
    if (o >= end || (own >= 0 && o + piece(own).size() > end) || (own < 0 && next > end)) {
        if (st.run < 0) {
            state after = st;
            after.run = 0;
            int8_t run = 0;
            after.partial.clear();
            if (take_line(line, after) && !complete(after)) {
                after.partial.clear();
                determined(after);
                // the next line of the source's text (no marker line between them in a snippet)
                run = after.src == st.src && after.line == st.line + 1 &&
                              s.line_start[(size_t) after.line] == start + (int32_t) line.size() ? 1 : 0;
            }
            const_cast<state &>(st).run = run; // a cache of the state's own facts
        }
        if (st.run != 1) return -1;
        // through the next line's last character that is not a blank (its text is known too)
        const std::string & nl = st.src == 0 ? al_.code[(size_t) st.line + 1] : al_.update[(size_t) st.line + 1];
        const size_t nl_last = nl.find_last_not_of(" \t\r\n");
        stop = (size_t) start + line.size() + (nl_last == std::string::npos ? 0 : nl_last + 1);
        if (stop >= s.at.size()) return -1;
    }
    if (o >= stop) return -1;
    if (own >= 0) return o + piece(own).size() <= stop ? (t == own ? 1 : 0) : -1;
    if (!realign_) return -1;
    // between two of the source's tokens: no further than the next
    return o + piece(t).size() <= std::min(next, stop) ? -1 : 0;
}

bool apply_constraint::allows(std::span<const llama_token> out, llama_token t) {
    if (t < 0 || (size_t) t >= pieces_.size()) return false;
    // roll back to the longest prefix of `out` the states were built for, then forward along out
    size_t k = 0;
    while (k < done_.size() && k < out.size() && done_[k] == out[k]) k++;
    done_.resize(k);
    states_.resize(k + 1);
    for (size_t i = k; i < out.size(); i++) {
        state st = states_.back();
        st.known = 0;
        st.run = -1;
        if (m_.is_eog(out[i]) || !extend(piece(out[i]), st)) {
            return false; // an output the constraint did not allow: nothing may follow it
        }
        states_.push_back(std::move(st));
        done_.push_back(out[i]);
    }
    if (m_.is_eog(t)) return end_ok(states_.back());
    const std::string & text = piece(t);
    if (text.empty()) return false; // control tokens write nothing
    if (!states_.back().known) determined(states_.back());
    if (own_token(states_.back(), t) == 0) return false;
    state st = states_.back();
    st.known = 0;
    st.run = -1;
    return extend(text, st);
}

} // namespace editspec
