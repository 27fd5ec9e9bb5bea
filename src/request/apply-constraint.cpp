// Constrained apply: the merged file is made of the original's and the snippet's lines (apply.h).
#include "editspec/apply.h"

#include <algorithm>
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

// a line of a few characters ("", "    pass", "}", ")") that new code repeats often
static bool trivial_line(const std::string & l) {
    size_t n = 0;
    for (char c : l) n += c != ' ' && c != '\t' && c != '\n' && c != '\r';
    return n <= 4;
}

// how alike two lines are: their common prefix and suffix over their mean length (one change in
// the middle of a line keeps a line alike); a line only re-indented (as a body wrapped in a new
// block is) 0.75, below any same-indent line as alike; otherwise 0 when their indents differ
static double line_similarity(const std::string & a, const std::string & b) {
    const size_t ia = a.find_first_not_of(' '), ib = b.find_first_not_of(' ');
    if (ia != ib) {
        return ia != std::string::npos && ib != std::string::npos && a.compare(ia, std::string::npos, b, ib) == 0 ? 0.75 : 0.0;
    }
    const size_t n = std::min(a.size(), b.size());
    size_t pre = 0, suf = 0;
    while (pre < n && a[pre] == b[pre]) pre++;
    while (suf < n - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) suf++;
    return 2.0 * (double) (pre + suf) / (double) (a.size() + b.size());
}

static int32_t indent_of(const std::string & l) {
    const size_t a = l.find_first_not_of(" \t");
    return a == std::string::npos ? -1 : (int32_t) a;
}

// per update line, the code line it is (a longest common subsequence of the two; trivial lines
// never anchor), or -1; no anchors past 4M table cells. Of the longest, the one that also pairs the
// most changed lines with a like old line in order (a changed line's old version tells which of two
// equal lines is meant), then the one with the earliest code lines (a line the code has twice is its
// occurrence nearest the previous anchor, not one further on that would delete the code between).
static std::vector<int32_t> apply_anchors(const std::vector<std::string> & code, const std::vector<std::string> & update) {
    const size_t n = code.size(), m = update.size();
    std::vector<int32_t> out(m, -1);
    if (n == 0 || m == 0 || n * m > (size_t) 4 << 20) return out;
    constexpr int32_t k_same = 1 << 16; // an anchor outweighs any number of like pairs
    auto same = [&](size_t i, size_t j) { return code[i] == update[j] && !trivial_line(code[i]); };
    auto alike = [&](size_t i, size_t j) {
        return !trivial_line(update[j]) && code[i] != update[j] && line_similarity(code[i], update[j]) > 0.7;
    };
    std::vector<int32_t> L((n + 1) * (m + 1), 0); // L[i][j]: best score of code[i:], update[j:]
    auto at = [&](size_t i, size_t j) -> int32_t & { return L[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;) {
        for (size_t j = m; j-- > 0;) {
            int32_t v = std::max(at(i + 1, j), at(i, j + 1));
            if (same(i, j)) v = std::max(v, at(i + 1, j + 1) + k_same);
            else if (alike(i, j)) v = std::max(v, at(i + 1, j + 1) + 1);
            at(i, j) = v;
        }
    }
    for (size_t i = 0, j = 0; i < n && j < m;) {
        if (same(i, j) && at(i, j) == at(i + 1, j + 1) + k_same) {
            out[j] = (int32_t) i;
            i++, j++;
        } else if (at(i, j) == at(i + 1, j + 1) + 1 && alike(i, j)) {
            i++, j++;
        } else if (at(i + 1, j) > at(i, j + 1)) {
            i++;
        } else {
            j++;
        }
    }
    return out;
}

// a fence line: "```" and at most a language tag ("```python"); with `partial`, a prefix of one
static bool is_fence(const std::string & s, bool partial = false) {
    if (partial && starts_with("```", s)) return true;
    if (!starts_with(s, "```")) return false;
    size_t end = s.size();
    while (!partial && end > 3 && (s[end - 1] == '\n' || s[end - 1] == '\r')) end--;
    for (size_t k = 3; k < end; k++) {
        const unsigned char c = (unsigned char) s[k];
        if (!std::isalnum(c) && c != '_' && c != '+' && c != '-' && c != '.') return false;
    }
    return true;
}

apply_constraint::apply_constraint(const model & m, const apply_input & in) : m_(m) {
    // a last line without its newline is matched as if it had one, so that no line can only end the file
    auto terminated = [](std::vector<std::string> v) {
        if (!v.empty() && v.back().back() != '\n') v.back() += '\n';
        return v;
    };
    code_ = terminated(apply_lines(in.code));
    std::vector<uint8_t> marker_before; // per update line: a marker since the previous line
    bool marker = false, marker_end;
    for (const std::string & l : terminated(apply_lines(in.update))) {
        if (apply_is_marker(l)) {
            marker = true;
            continue;
        }
        if (is_fence(l)) continue; // a fenced snippet: its fences are not lines of the merge
        update_.push_back(l);
        marker_before.push_back(marker ? 1 : 0);
        marker = false;
    }
    // a snippet without a marker at its top or its end still leaves the rest of the file as it is
    // (LLMs leave those markers out); a deletion there shows only by context, as everywhere
    if (!update_.empty()) marker_before[0] = 1;
    marker_end = true;
    anchor_ = apply_anchors(code_, update_);
    // a line the code has twice is the occurrence nearest the snippet's next anchored line in the
    // same block (a block's lines stand together in the code)
    for (int32_t j = (int32_t) update_.size() - 1; j-- > 0;) {
        if (anchor_[(size_t) j] < 0) continue;
        int32_t j2 = j + 1;
        while (j2 < (int32_t) update_.size() && !marker_before[(size_t) j2] && anchor_[(size_t) j2] < 0) j2++;
        if (j2 == (int32_t) update_.size() || marker_before[(size_t) j2]) continue;
        for (int32_t i = anchor_[(size_t) j2] - 1; i > anchor_[(size_t) j]; i--) {
            if (code_[(size_t) i] == update_[(size_t) j]) {
                anchor_[(size_t) j] = i;
                break;
            }
        }
    }
    code_anchor_.assign(code_.size(), -1);
    for (int32_t j = 0; j < (int32_t) update_.size(); j++) {
        if (anchor_[j] >= 0) code_anchor_[(size_t) anchor_[j]] = j;
    }
    dropped_.assign(code_.size(), 0);
    // a changed line stands where its old version was: an unanchored update line takes the place of
    // the most similar unanchored code line between its neighbours' anchors (same indent, >= 70 %
    // alike), whose old version then may not be written
    place_ = anchor_;
    for (int32_t j = 0, lo = 0; j < (int32_t) update_.size(); j++) {
        if (anchor_[j] >= 0) {
            lo = anchor_[j] + 1;
            continue;
        }
        // a short line ("", "}", "x = 1") is alike too many lines to say which it replaces
        if (trivial_line(update_[(size_t) j])) continue;
        int32_t hi = (int32_t) code_.size();
        for (int32_t k = j + 1; k < (int32_t) update_.size(); k++) {
            if (anchor_[k] >= 0) { hi = anchor_[k]; break; }
        }
        int32_t best = -1;
        double best_sim = 0.7;
        for (int32_t i = lo; i < hi; i++) {
            if (code_anchor_[(size_t) i] >= 0 || dropped_[(size_t) i]) continue;
            const double sim = line_similarity(code_[(size_t) i], update_[(size_t) j]);
            if (sim > best_sim) best = i, best_sim = sim; // the nearest of the likest
        }
        if (best >= 0) {
            place_[(size_t) j] = best;
            dropped_[(size_t) best] = 1;
            lo = best + 1;
        }
    }
    // a trivial line ("", "}") right beside a placed one, with no marker between, is that line's
    // neighbour in the code too when the code has it there (as a diff's context): a blank line before
    // a marker is then not a new line, so the code the marker elides stays required
    auto anchor_beside = [&](int32_t j, int32_t j_from, int32_t step) {
        const int32_t i = place_[(size_t) j_from] + step;
        if (place_[(size_t) j] >= 0 || i < 0 || i >= (int32_t) code_.size() || code_anchor_[(size_t) i] >= 0) return;
        if (dropped_[(size_t) i] || code_[(size_t) i] != update_[(size_t) j]) return;
        anchor_[(size_t) j] = place_[(size_t) j] = i;
        code_anchor_[(size_t) i] = j;
    };
    for (int32_t j = 1; j < (int32_t) update_.size(); j++) {
        if (place_[(size_t) j - 1] >= 0 && !marker_before[(size_t) j]) anchor_beside(j, j - 1, +1);
    }
    for (int32_t j = (int32_t) update_.size() - 1; j-- > 0;) {
        if (place_[(size_t) j + 1] >= 0 && !marker_before[(size_t) j + 1]) anchor_beside(j, j + 1, -1);
    }
    // a block the snippet re-indents (wrapped in a new one) keeps its short lines too ("    )", "}"):
    // a line right beside a re-indented one that is its code neighbour re-indented the same way
    auto reindented = [&](int32_t j) {
        const int32_t i = place_[(size_t) j];
        return i >= 0 && anchor_[(size_t) j] < 0 && indent_of(code_[(size_t) i]) != indent_of(update_[(size_t) j]) &&
               line_similarity(code_[(size_t) i], update_[(size_t) j]) == 0.75;
    };
    auto reindent_beside = [&](int32_t j, int32_t j_from, int32_t step) {
        const int32_t i = place_[(size_t) j_from] + step;
        if (place_[(size_t) j] >= 0 || !reindented(j_from) || i < 0 || i >= (int32_t) code_.size()) return;
        if (code_anchor_[(size_t) i] >= 0 || dropped_[(size_t) i] || line_similarity(code_[(size_t) i], update_[(size_t) j]) != 0.75) return;
        if (indent_of(update_[(size_t) j]) - indent_of(code_[(size_t) i]) !=
            indent_of(update_[(size_t) j_from]) - indent_of(code_[(size_t) place_[(size_t) j_from]])) return;
        place_[(size_t) j] = i;
        dropped_[(size_t) i] = 1;
    };
    for (int32_t j = 1; j < (int32_t) update_.size(); j++) {
        if (!marker_before[(size_t) j]) reindent_beside(j, j - 1, +1);
    }
    for (int32_t j = (int32_t) update_.size() - 1; j-- > 0;) {
        if (!marker_before[(size_t) j + 1]) reindent_beside(j, j + 1, -1);
    }
    // trivial lines that end a block of the snippet (a marker or the end next) after changed lines
    // are the code's lines right after the block's last placed line when the code has them there
    // (the longest such run): the blank lines after a rewritten function's body are the ones the old
    // body had; the same for trivial lines that start a block, before the block's first placed line
    const int32_t n_up = (int32_t) update_.size(), n_code = (int32_t) code_.size();
    auto trivial_free = [&](int32_t j) { return place_[(size_t) j] < 0 && trivial_line(update_[(size_t) j]); };
    auto code_free = [&](int32_t i, int32_t j) {
        return i >= 0 && i < n_code && code_anchor_[(size_t) i] < 0 && !dropped_[(size_t) i] && code_[(size_t) i] == update_[(size_t) j];
    };
    auto anchor_run = [&](int32_t j0, int32_t j1, int32_t i0) { // update lines j0..j1 at code lines i0...
        for (int32_t t = j0; t <= j1; t++) {
            if (!code_free(i0 + t - j0, t)) return false;
        }
        for (int32_t t = j0; t <= j1; t++) {
            anchor_[(size_t) t] = place_[(size_t) t] = i0 + t - j0;
            code_anchor_[(size_t) (i0 + t - j0)] = t;
        }
        return true;
    };
    for (int32_t j = 0; j < n_up; j++) {
        if (!trivial_free(j) || !(j + 1 == n_up || marker_before[(size_t) j + 1])) continue;
        int32_t j0 = j, k;
        while (j0 > 0 && !marker_before[(size_t) j0] && trivial_free(j0 - 1)) j0--;
        for (k = j0; k > 0 && !marker_before[(size_t) k] && place_[(size_t) k - 1] < 0; k--) {}
        if (k == 0 || marker_before[(size_t) k]) continue;
        for (int32_t t = j0; t <= j && !anchor_run(t, j, place_[(size_t) k - 1] + 1); t++) {}
    }
    for (int32_t j = n_up; j-- > 0;) {
        if (!trivial_free(j) || !(j == 0 || marker_before[(size_t) j])) continue;
        int32_t j1 = j, k;
        while (j1 + 1 < n_up && !marker_before[(size_t) j1 + 1] && trivial_free(j1 + 1)) j1++;
        for (k = j1; k + 1 < n_up && !marker_before[(size_t) k + 1] && place_[(size_t) k + 1] < 0; k++) {}
        if (k + 1 == n_up || marker_before[(size_t) k + 1]) continue;
        for (int32_t t = j1; t >= j && !anchor_run(j, t, place_[(size_t) k + 1] - (t - j + 1)); t--) {}
    }
    // kept code lines: where a marker stands between two placed lines (or before the first, after
    // the last) and every new line there has a marker before and after it, the code between them is
    // elided (the new lines are inserted somewhere in it), so unchanged; between two placed lines with
    // no marker between them, the code lines between are replaced by the snippet's (none: a deletion,
    // which the snippet shows only so)
    std::vector<uint8_t> kept(code_.size(), 0);
    int32_t prev_a = -1; // code line of the previous placed line (-1: the top)
    // new lines around a re-indented block open and close the block that wraps it ("try:" ...
    // "except ...: pass"): insertions, which replace no code beside them
    std::vector<uint8_t> wraps(update_.size(), 0);
    for (int32_t j = 0; j < (int32_t) update_.size();) {
        if (place_[(size_t) j] >= 0) { j++; continue; }
        int32_t e = j + 1; // the run of new lines j..e-1, no marker inside
        while (e < (int32_t) update_.size() && place_[(size_t) e] < 0 && !marker_before[(size_t) e]) e++;
        const bool after = j > 0 && !marker_before[(size_t) j] && reindented(j - 1);
        const bool before = e < (int32_t) update_.size() && !marker_before[(size_t) e] && reindented(e);
        for (int32_t t = j; t < e; t++) wraps[(size_t) t] = after || before;
        j = e;
    }
    bool seen_marker = false, new_open = false, new_since_marker = false;
    auto keep = [&](int32_t from, int32_t to) {
        if (seen_marker && !new_open && !new_since_marker) {
            for (int32_t i = from; i < to; i++) kept[(size_t) i] = 1;
        }
    };
    for (int32_t j = 0; j < (int32_t) update_.size(); j++) {
        if (marker_before[(size_t) j]) seen_marker = true, new_since_marker = false;
        if (place_[j] < 0) {
            if (wraps[(size_t) j]) continue;
            new_open = new_open || !seen_marker; // right after the previous placed line: replaces code there
            new_since_marker = true;
            continue;
        }
        keep(prev_a + 1, place_[j]);
        if (prev_a >= 0 && !seen_marker) {
            for (int32_t i = prev_a + 1; i < place_[j]; i++) dropped_[(size_t) i] = 1;
        }
        prev_a = place_[j];
        seen_marker = new_open = new_since_marker = false;
    }
    if (marker_end) seen_marker = true, new_since_marker = false;
    if (prev_a >= 0 || !update_.empty()) keep(prev_a + 1, (int32_t) code_.size());
    kept_before_.assign(code_.size() + 1, 0);
    for (size_t i = 0; i < code_.size(); i++) kept_before_[i + 1] = kept_before_[i] + kept[i];
    // per update line j: the code line of the first placed update line from j on, an unchanged line or
    // a changed line's place (code_.size(): none), which the output may not pass before writing it
    next_place_.assign(update_.size() + 1, (int32_t) code_.size());
    for (size_t j = update_.size(); j-- > 0;) next_place_[j] = place_[j] >= 0 ? place_[j] : next_place_[j + 1];
    for (int32_t i = 0; i < (int32_t) code_.size(); i++) in_code_[code_[i]].push_back(i);
    for (int32_t j = 0; j < (int32_t) update_.size(); j++) in_update_[update_[j]].push_back(j);
    const size_t n = (size_t) m.facts().n_vocab;
    pieces_.resize(n);
    piece_known_.assign(n, 0);
    states_.push_back(state{{{0, 0}}, "", 0});
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
    if (i < p.i || dropped_[(size_t) i] || kept_before_[(size_t) i] != kept_before_[(size_t) p.i]) return {-1, -1};
    const int32_t k = code_anchor_[(size_t) i];
    if (k < 0 || k < p.j) return i < next_place_[(size_t) p.j] ? pos{i + 1, p.j} : pos{-1, -1};
    if (k != p.j) return {-1, -1};
    return {i + 1, k + 1};
}

apply_constraint::pos apply_constraint::from_update(pos p, int32_t j) const {
    if (j != p.j) return {-1, -1};
    const int32_t a = place_[(size_t) j];
    if (a < 0) return {p.i, j + 1};
    // a changed line whose guessed place was passed still has to be written (no dead end)
    if (a < p.i) return anchor_[(size_t) j] < 0 ? pos{p.i, j + 1} : pos{-1, -1};
    if (kept_before_[(size_t) a] != kept_before_[(size_t) p.i]) return {-1, -1};
    return {a + 1, j + 1};
}

bool apply_constraint::take_line(const std::string & line, state & st) const {
    if (st.fences == 2) return false; // nothing after the closing fence
    if (is_fence(line)) {
        if (!fence_ok(st)) return false;
        st.fences++;
        return true;
    }
    st.lines++;
    std::vector<pos> next;
    auto add = [&](pos p) {
        if (p.i < 0) return;
        for (const pos & q : next) {
            if (q.i <= p.i && q.j <= p.j) return; // q leaves at least as much to use
        }
        next.erase(std::remove_if(next.begin(), next.end(), [&](const pos & q) { return p.i <= q.i && p.j <= q.j; }),
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
    if (fence_ok(st) && is_fence(p, true)) return true;
    for (const pos & q : st.at) {
        for (int32_t i = q.i; i < (int32_t) code_.size(); i++) {
            if (starts_with(code_[i], p) && from_code(q, i).i >= 0) return true;
        }
        for (int32_t j = q.j; j < (int32_t) update_.size(); j++) {
            if (starts_with(update_[j], p) && from_update(q, j).i >= 0) return true;
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
        if (kept_before_[(size_t) q.i] == kept_before_.back() && q.j == (int32_t) update_.size()) return true;
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

bool apply_constraint::allows(std::span<const llama_token> out, llama_token t) {
    if (t < 0 || (size_t) t >= pieces_.size()) return false;
    // roll back to the longest prefix of `out` the states were built for, then forward along out
    size_t k = 0;
    while (k < done_.size() && k < out.size() && done_[k] == out[k]) k++;
    done_.resize(k);
    states_.resize(k + 1);
    for (size_t i = k; i < out.size(); i++) {
        state st = states_.back();
        if (m_.is_eog(out[i]) || !extend(piece(out[i]), st)) {
            return false; // an output the constraint did not allow: nothing may follow it
        }
        states_.push_back(std::move(st));
        done_.push_back(out[i]);
    }
    if (m_.is_eog(t)) return end_ok(states_.back());
    const std::string & text = piece(t);
    if (text.empty()) return false; // control tokens write nothing
    state st = states_.back();
    return extend(text, st);
}

} // namespace editspec
