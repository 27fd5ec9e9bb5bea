// Constrained apply's plan: how a snippet's lines stand to the file's (apply.h, apply_align), in
// stages: the unchanged lines, the changed lines' places, the short lines beside them, the code the
// markers elide.
#include "editspec/apply.h"

#include <algorithm>

namespace editspec {

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

// reads the two texts' lines; the snippet's markers become marks on the line after them
static void read_lines(apply_alignment & a, const apply_input & in) {
    // a last line without its newline is matched as if it had one, so that no line can only end the file
    auto terminated = [](std::vector<std::string> v) {
        if (!v.empty() && v.back().back() != '\n') v.back() += '\n';
        return v;
    };
    a.code = terminated(apply_lines(in.code));
    bool marker = false;
    for (const std::string & l : terminated(apply_lines(in.update))) {
        if (apply_is_marker(l)) {
            marker = true;
            continue;
        }
        if (apply_is_fence(l)) continue; // a fenced snippet: its fences are not lines of the merge
        a.update.push_back(l);
        a.marker_before.push_back(marker ? 1 : 0);
        marker = false;
    }
    a.marker_at_end = marker;
    // a snippet without a marker at its top or its end still leaves the rest of the file as it is
    // (LLMs leave those markers out); a deletion there shows only by context, as everywhere
    if (!a.update.empty()) a.marker_before[0] = 1;
}

// the unchanged lines: anchors, each at the occurrence nearest the snippet's next anchored line
static void anchor_lines(apply_alignment & a) {
    a.anchor = apply_anchors(a.code, a.update);
    // a line the code has twice is the occurrence nearest the snippet's next anchored line in the
    // same block (a block's lines stand together in the code)
    const int32_t n_up = (int32_t) a.update.size();
    for (int32_t j = n_up - 1; j-- > 0;) {
        if (a.anchor[(size_t) j] < 0) continue;
        int32_t j2 = j + 1;
        while (j2 < n_up && !a.marker_before[(size_t) j2] && a.anchor[(size_t) j2] < 0) j2++;
        if (j2 == n_up || a.marker_before[(size_t) j2]) continue;
        for (int32_t i = a.anchor[(size_t) j2] - 1; i > a.anchor[(size_t) j]; i--) {
            if (a.code[(size_t) i] == a.update[(size_t) j]) {
                a.anchor[(size_t) j] = i;
                break;
            }
        }
    }
    a.code_anchor.assign(a.code.size(), -1);
    for (int32_t j = 0; j < n_up; j++) {
        if (a.anchor[(size_t) j] >= 0) a.code_anchor[(size_t) a.anchor[(size_t) j]] = j;
    }
    a.dropped.assign(a.code.size(), 0);
}

// a changed line stands where its old version was: an unanchored update line takes the place of
// the most similar unanchored code line between its neighbours' anchors (same indent, >= 70 %
// alike), whose old version then may not be written
static void place_changed_lines(apply_alignment & a) {
    a.place = a.anchor;
    const int32_t n_up = (int32_t) a.update.size();
    for (int32_t j = 0, lo = 0; j < n_up; j++) {
        if (a.anchor[(size_t) j] >= 0) {
            lo = a.anchor[(size_t) j] + 1;
            continue;
        }
        // a short line ("", "}", "x = 1") is alike too many lines to say which it replaces
        if (trivial_line(a.update[(size_t) j])) continue;
        int32_t hi = (int32_t) a.code.size();
        for (int32_t k = j + 1; k < n_up; k++) {
            if (a.anchor[(size_t) k] >= 0) { hi = a.anchor[(size_t) k]; break; }
        }
        int32_t best = -1;
        double best_sim = 0.7;
        for (int32_t i = lo; i < hi; i++) {
            if (a.code_anchor[(size_t) i] >= 0 || a.dropped[(size_t) i]) continue;
            const double sim = line_similarity(a.code[(size_t) i], a.update[(size_t) j]);
            if (sim > best_sim) best = i, best_sim = sim; // the nearest of the likest
        }
        if (best >= 0) {
            a.place[(size_t) j] = best;
            a.dropped[(size_t) best] = 1;
            lo = best + 1;
        }
    }
}

// runs step(j, j_from, dir) over each update line beside a line of the same block: forward from its
// predecessor, then backward from its successor
template <typename F> static void each_neighbour(const apply_alignment & a, F step) {
    const int32_t n_up = (int32_t) a.update.size();
    for (int32_t j = 1; j < n_up; j++) {
        if (!a.marker_before[(size_t) j]) step(j, j - 1, +1);
    }
    for (int32_t j = n_up - 1; j-- > 0;) {
        if (!a.marker_before[(size_t) j + 1]) step(j, j + 1, -1);
    }
}

// a trivial line ("", "}") right beside a placed one, with no marker between, is that line's
// neighbour in the code too when the code has it there (as a diff's context): a blank line before
// a marker is then not a new line, so the code the marker elides stays required
static void anchor_trivial_neighbours(apply_alignment & a) {
    each_neighbour(a, [&](int32_t j, int32_t j_from, int32_t step) {
        if (a.place[(size_t) j_from] < 0) return;
        const int32_t i = a.place[(size_t) j_from] + step;
        if (a.place[(size_t) j] >= 0 || i < 0 || i >= (int32_t) a.code.size() || a.code_anchor[(size_t) i] >= 0) return;
        if (a.dropped[(size_t) i] || a.code[(size_t) i] != a.update[(size_t) j]) return;
        a.anchor[(size_t) j] = a.place[(size_t) j] = i;
        a.code_anchor[(size_t) i] = j;
    });
}

// update line j stands in place of a code line it re-indents
static bool reindented(const apply_alignment & a, int32_t j) {
    const int32_t i = a.place[(size_t) j];
    return i >= 0 && a.anchor[(size_t) j] < 0 && indent_of(a.code[(size_t) i]) != indent_of(a.update[(size_t) j]) &&
           line_similarity(a.code[(size_t) i], a.update[(size_t) j]) == 0.75;
}

// a block the snippet re-indents (wrapped in a new one) keeps its short lines too ("    )", "}"):
// a line right beside a re-indented one that is its code neighbour re-indented the same way
static void place_reindented_neighbours(apply_alignment & a) {
    each_neighbour(a, [&](int32_t j, int32_t j_from, int32_t step) {
        const int32_t i = a.place[(size_t) j_from] + step;
        if (a.place[(size_t) j] >= 0 || !reindented(a, j_from) || i < 0 || i >= (int32_t) a.code.size()) return;
        if (a.code_anchor[(size_t) i] >= 0 || a.dropped[(size_t) i] ||
            line_similarity(a.code[(size_t) i], a.update[(size_t) j]) != 0.75) return;
        const std::string & from = a.code[(size_t) a.place[(size_t) j_from]];
        if (indent_of(a.update[(size_t) j]) - indent_of(a.code[(size_t) i]) !=
            indent_of(a.update[(size_t) j_from]) - indent_of(from)) return;
        a.place[(size_t) j] = i;
        a.dropped[(size_t) i] = 1;
    });
}

// trivial lines that end a block of the snippet (a marker or the end next) after changed lines
// are the code's lines right after the block's last placed line when the code has them there
// (the longest such run): the blank lines after a rewritten function's body are the ones the old
// body had; the same for trivial lines that start a block, before the block's first placed line
static void anchor_block_edges(apply_alignment & a) {
    const int32_t n_up = (int32_t) a.update.size(), n_code = (int32_t) a.code.size();
    const auto & mb = a.marker_before;
    auto trivial_free = [&](int32_t j) { return a.place[(size_t) j] < 0 && trivial_line(a.update[(size_t) j]); };
    auto code_free = [&](int32_t i, int32_t j) {
        return i >= 0 && i < n_code && a.code_anchor[(size_t) i] < 0 && !a.dropped[(size_t) i] &&
               a.code[(size_t) i] == a.update[(size_t) j];
    };
    auto anchor_run = [&](int32_t j0, int32_t j1, int32_t i0) { // update lines j0..j1 at code lines i0...
        for (int32_t t = j0; t <= j1; t++) {
            if (!code_free(i0 + t - j0, t)) return false;
        }
        for (int32_t t = j0; t <= j1; t++) {
            a.anchor[(size_t) t] = a.place[(size_t) t] = i0 + t - j0;
            a.code_anchor[(size_t) (i0 + t - j0)] = t;
        }
        return true;
    };
    for (int32_t j = 0; j < n_up; j++) {
        if (!trivial_free(j) || !(j + 1 == n_up || mb[(size_t) j + 1])) continue;
        int32_t j0 = j, k;
        while (j0 > 0 && !mb[(size_t) j0] && trivial_free(j0 - 1)) j0--;
        for (k = j0; k > 0 && !mb[(size_t) k] && a.place[(size_t) k - 1] < 0; k--) {}
        if (k == 0 || mb[(size_t) k]) continue;
        for (int32_t t = j0; t <= j && !anchor_run(t, j, a.place[(size_t) k - 1] + 1); t++) {}
    }
    for (int32_t j = n_up; j-- > 0;) {
        if (!trivial_free(j) || !(j == 0 || mb[(size_t) j])) continue;
        int32_t j1 = j, k;
        while (j1 + 1 < n_up && !mb[(size_t) j1 + 1] && trivial_free(j1 + 1)) j1++;
        for (k = j1; k + 1 < n_up && !mb[(size_t) k + 1] && a.place[(size_t) k + 1] < 0; k++) {}
        if (k + 1 == n_up || mb[(size_t) k + 1]) continue;
        for (int32_t t = j1; t >= j && !anchor_run(j, t, a.place[(size_t) k + 1] - (t - j + 1)); t--) {}
    }
}

// per update line: a new line around a re-indented block, which opens or closes the block that wraps
// it ("try:" ... "except ...: pass"): an insertion, which replaces no code beside it
static std::vector<uint8_t> wrapping_lines(const apply_alignment & a) {
    const int32_t n_up = (int32_t) a.update.size();
    std::vector<uint8_t> wraps(a.update.size(), 0);
    for (int32_t j = 0; j < n_up;) {
        if (a.place[(size_t) j] >= 0) { j++; continue; }
        int32_t e = j + 1; // the run of new lines j..e-1, no marker inside
        while (e < n_up && a.place[(size_t) e] < 0 && !a.marker_before[(size_t) e]) e++;
        const bool after = j > 0 && !a.marker_before[(size_t) j] && reindented(a, j - 1);
        const bool before = e < n_up && !a.marker_before[(size_t) e] && reindented(a, e);
        for (int32_t t = j; t < e; t++) wraps[(size_t) t] = after || before;
        j = e;
    }
    return wraps;
}

// kept code lines: where a marker stands between two placed lines (or before the first, after
// the last) and every new line there has a marker before and after it, the code between them is
// elided (the new lines are inserted somewhere in it), so unchanged; between two placed lines with
// no marker between them, the code lines between are replaced by the snippet's (none: a deletion,
// which the snippet shows only so)
static void keep_elided_code(apply_alignment & a) {
    std::vector<uint8_t> kept(a.code.size(), 0);
    const std::vector<uint8_t> wraps = wrapping_lines(a);
    int32_t prev_a = -1; // code line of the previous placed line (-1: the top)
    bool seen_marker = false, new_open = false, new_since_marker = false;
    auto keep = [&](int32_t from, int32_t to) {
        if (seen_marker && !new_open && !new_since_marker) {
            for (int32_t i = from; i < to; i++) kept[(size_t) i] = 1;
        }
    };
    for (int32_t j = 0; j < (int32_t) a.update.size(); j++) {
        if (a.marker_before[(size_t) j]) seen_marker = true, new_since_marker = false;
        const int32_t at = a.place[(size_t) j];
        if (at < 0) {
            if (wraps[(size_t) j]) continue;
            new_open = new_open || !seen_marker; // right after the previous placed line: replaces code there
            new_since_marker = true;
            continue;
        }
        keep(prev_a + 1, at);
        if (prev_a >= 0 && !seen_marker) {
            for (int32_t i = prev_a + 1; i < at; i++) a.dropped[(size_t) i] = 1;
        }
        prev_a = at;
        seen_marker = new_open = new_since_marker = false;
    }
    // the end counts as a marker: a snippet without one there leaves the rest of the file as it is
    seen_marker = true, new_since_marker = false;
    if (!a.update.empty()) keep(prev_a + 1, (int32_t) a.code.size());
    // new lines right after the last placed line replace the code there, and a marker after them says the
    // file goes on: its last line is kept, so a merge cannot end at the new lines and drop the file's tail
    // (issue 69: a merge is whole)
    if (new_open && a.marker_at_end) {
        for (int32_t i = (int32_t) a.code.size() - 1; i > prev_a; i--) {
            if (a.code[(size_t) i].find_first_not_of(" \t\r\n") == std::string::npos) continue;
            kept[(size_t) i] = 1;
            break;
        }
    }
    a.kept_before.assign(a.code.size() + 1, 0);
    for (size_t i = 0; i < a.code.size(); i++) a.kept_before[i + 1] = a.kept_before[i] + kept[i];
    a.next_place.assign(a.update.size() + 1, (int32_t) a.code.size());
    for (size_t j = a.update.size(); j-- > 0;) a.next_place[j] = a.place[j] >= 0 ? a.place[j] : a.next_place[j + 1];
}

apply_alignment apply_align(const apply_input & in) {
    apply_alignment a;
    read_lines(a, in);
    anchor_lines(a);
    place_changed_lines(a);
    anchor_trivial_neighbours(a);
    place_reindented_neighbours(a);
    anchor_block_edges(a);
    keep_elided_code(a);
    return a;
}

} // namespace editspec
