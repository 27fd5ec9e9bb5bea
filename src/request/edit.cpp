// Code editing: the edit prompt, code extraction, unified line diff.
//
// ref: E. Myers, "An O(ND) Difference Algorithm and Its Variations" (1986); GNU diffutils' unified
//      format (hunk ranges, "\ No newline at end of file")
#include "editspec/edit.h"
#include "editspec/chat.h"
#include "editspec/names.h"

#include <algorithm>

namespace editspec {

// ----------------------------------------------------------------------------
// prompt

static constexpr named<prompt_layout> LAYOUTS[] = {{PROMPT_LAYOUT_AUTO, "auto"},
                                                   {PROMPT_LAYOUT_FILE_FIRST, "file-first"},
                                                   {PROMPT_LAYOUT_INSTRUCTION_FIRST, "instruction-first"}};

const char * prompt_layout_name(prompt_layout l) { return name_of(LAYOUTS, l); }
bool prompt_layout_parse(const std::string & name, prompt_layout & out) { return name_parse(LAYOUTS, name, out); }
std::string prompt_layout_names() { return names_list(LAYOUTS); }

prompt_layout prompt_layout_for_edit(const model & m, prompt_layout layout) {
    if (layout != PROMPT_LAYOUT_AUTO) return layout;
    return edit_prompt_parse_special(m) ? PROMPT_LAYOUT_FILE_FIRST : PROMPT_LAYOUT_INSTRUCTION_FIRST;
}

prompt_layout prompt_layout_for_apply(prompt_layout layout) {
    return layout == PROMPT_LAYOUT_AUTO ? PROMPT_LAYOUT_FILE_FIRST : layout;
}

std::string edit_prompt_plain(const std::string & instruction, const std::string & code, prompt_layout layout) {
    if (layout == PROMPT_LAYOUT_FILE_FIRST) {
        return "### Original code:\n" + code + "\n### Instruction:\n" + instruction + "\n### Edited code:\n";
    }
    return "### Instruction:\n" + instruction + "\n### Original code:\n" + code + "\n### Edited code:\n";
}

bool edit_prompt_parse_special(const model & m) {
    return chat_template_known(m);
}

std::string edit_prompt(const model & m, const std::string & instruction, const std::string & code, prompt_layout layout) {
    layout = prompt_layout_for_edit(m, layout);
    if (!edit_prompt_parse_special(m)) {
        return edit_prompt_plain(instruction, code, layout);
    }
    const bool nl = !code.empty() && code.back() == '\n';
    const std::string fenced = "```\n" + code + (nl ? "" : "\n") + "```";
    const std::string user = layout == PROMPT_LAYOUT_FILE_FIRST ? fenced + "\n\n" + instruction : instruction + "\n\n" + fenced;
    return chat_render(m, {{"user", user}});
}

token_vec edit_original_tokens(const model & m, const std::string & code) {
    return m.tokenize(code, /*add_special=*/false, /*parse_special=*/false);
}

// ----------------------------------------------------------------------------
// the answer's code

namespace {

// lines with their "\n" (the last may lack one)
std::vector<std::string> split_lines(const std::string & s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
        const size_t nl = s.find('\n', i);
        const size_t end = nl == std::string::npos ? s.size() : nl + 1;
        out.push_back(s.substr(i, end - i));
        i = end;
    }
    return out;
}

std::string trim(const std::string & s) {
    size_t b = 0, e = s.size();
    while (b < e && isspace((unsigned char) s[b])) b++;
    while (e > b && isspace((unsigned char) s[e - 1])) e--;
    return s.substr(b, e - b);
}

} // namespace

std::string edit_extract_code(const std::string & answer) {
    const std::vector<std::string> lines = split_lines(answer);
    size_t first = 0;
    while (first < lines.size() && trim(lines[first]).empty()) first++;
    if (first == lines.size() || trim(lines[first]).rfind("```", 0) != 0) {
        return answer;
    }
    size_t close = lines.size();
    for (size_t i = lines.size(); i-- > first + 1;) {
        if (trim(lines[i]) == "```") {
            close = i;
            break;
        }
    }
    std::string out;
    for (size_t i = first + 1; i < close; i++) out += lines[i];
    return out;
}

// ----------------------------------------------------------------------------
// unified diff

namespace {

enum diff_op : uint8_t { DIFF_EQUAL, DIFF_DELETE, DIFF_INSERT };

struct diff_step {
    diff_op op;
    int32_t ia; // line in a (EQUAL, DELETE)
    int32_t ib; // line in b (EQUAL, INSERT)
};

// Myers' greedy forward algorithm over a[a0 .. a1) and b[b0 .. b1), keeping each round's V to walk
// back. Returns false when D would exceed d_max (the caller then replaces the whole range).
bool myers(const std::vector<std::string> & a, int32_t a0, int32_t a1, const std::vector<std::string> & b, int32_t b0,
           int32_t b1, int32_t d_max, std::vector<diff_step> & out) {
    const int32_t N = a1 - a0, M = b1 - b0, MAX = N + M;
    if (MAX == 0) return true;
    const int32_t off = MAX + 1;
    std::vector<int32_t> v(2 * MAX + 3, 0);
    std::vector<std::vector<int32_t>> trace; // [D][k + D] x reached on diagonal k after round D
    int32_t d_end = -1;
    for (int32_t d = 0; d <= std::min(MAX, d_max) && d_end < 0; d++) {
        for (int32_t k = -d; k <= d; k += 2) {
            int32_t x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
            int32_t y = x - k;
            while (x < N && y < M && a[a0 + x] == b[b0 + y]) {
                x++;
                y++;
            }
            v[off + k] = x;
            if (x >= N && y >= M) {
                d_end = d;
            }
        }
        trace.emplace_back(v.begin() + off - d, v.begin() + off + d + 1);
    }
    if (d_end < 0) return false;
    // walk back from (N, M)
    std::vector<diff_step> rev;
    int32_t x = N, y = M;
    for (int32_t d = d_end; d >= 0; d--) {
        const std::vector<int32_t> & vd = d > 0 ? trace[d - 1] : trace[0]; // V before round d
        const int32_t k = x - y;
        int32_t prev_k = 0, prev_x = 0, prev_y = 0;
        if (d > 0) {
            auto at = [&](int32_t kk) { return vd[kk + (d - 1)]; };
            prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
            prev_x = at(prev_k);
            prev_y = prev_x - prev_k;
        }
        while (x > prev_x && y > prev_y) {
            rev.push_back({DIFF_EQUAL, a0 + x - 1, b0 + y - 1});
            x--;
            y--;
        }
        if (d > 0) {
            if (x == prev_x) {
                rev.push_back({DIFF_INSERT, -1, b0 + y - 1});
            } else {
                rev.push_back({DIFF_DELETE, a0 + x - 1, -1});
            }
            x = prev_x;
            y = prev_y;
        }
    }
    out.insert(out.end(), rev.rbegin(), rev.rend());
    return true;
}

void emit_line(std::string & out, char tag, const std::string & line) {
    out += tag;
    out += line;
    if (line.empty() || line.back() != '\n') {
        out += "\n\\ No newline at end of file\n";
    }
}

std::string range(int32_t start0, int32_t count) {
    // GNU: an empty range names the line before it; a one-line range omits the count
    const int32_t start = count == 0 ? start0 : start0 + 1;
    return count == 1 ? std::to_string(start) : std::to_string(start) + "," + std::to_string(count);
}

} // namespace

std::string edit_unified_diff(const std::string & ta, const std::string & tb, const std::string & name_a,
                              const std::string & name_b, int32_t context) {
    if (ta == tb) {
        return "";
    }
    const std::vector<std::string> a = split_lines(ta), b = split_lines(tb);
    const int32_t na = (int32_t) a.size(), nb = (int32_t) b.size();
    int32_t head = 0;
    while (head < na && head < nb && a[head] == b[head]) head++;
    int32_t tail = 0;
    while (tail < na - head && tail < nb - head && a[na - 1 - tail] == b[nb - 1 - tail]) tail++;

    std::vector<diff_step> steps;
    for (int32_t i = 0; i < head; i++) steps.push_back({DIFF_EQUAL, i, i});
    // a middle rewritten beyond 4000 line edits is shown as one replacement
    if (!myers(a, head, na - tail, b, head, nb - tail, 4000, steps)) {
        for (int32_t i = head; i < na - tail; i++) steps.push_back({DIFF_DELETE, i, -1});
        for (int32_t i = head; i < nb - tail; i++) steps.push_back({DIFF_INSERT, -1, i});
    }
    for (int32_t i = 0; i < tail; i++) steps.push_back({DIFF_EQUAL, na - tail + i, nb - tail + i});

    // hunks: changes with up to `context` equal lines around them; changes closer than 2 * context
    // share a hunk
    std::string out = "--- " + name_a + "\n+++ " + name_b + "\n";
    const int32_t n = (int32_t) steps.size();
    context = std::max(0, context);
    int32_t i = 0;
    while (i < n) {
        while (i < n && steps[i].op == DIFF_EQUAL) i++;
        if (i == n) break;
        int32_t start = std::max(0, i - context);
        // extend over changes separated by at most 2 * context equal lines
        int32_t end = i;
        while (true) {
            while (end < n && steps[end].op != DIFF_EQUAL) end++;
            int32_t eq = end;
            while (eq < n && steps[eq].op == DIFF_EQUAL) eq++;
            if (eq < n && eq - end <= 2 * context) {
                end = eq;
                continue;
            }
            end = std::min(end + context, eq);
            break;
        }
        // line ranges: the first a / b line at or after start
        int32_t a_start = 0, b_start = 0, a_count = 0, b_count = 0;
        {
            // position in a and b before steps[start]
            int32_t pa = 0, pb = 0;
            for (int32_t s = 0; s < start; s++) {
                pa += steps[s].op != DIFF_INSERT;
                pb += steps[s].op != DIFF_DELETE;
            }
            a_start = pa;
            b_start = pb;
        }
        for (int32_t s = start; s < end; s++) {
            a_count += steps[s].op != DIFF_INSERT;
            b_count += steps[s].op != DIFF_DELETE;
        }
        out += "@@ -" + range(a_start, a_count) + " +" + range(b_start, b_count) + " @@\n";
        for (int32_t s = start; s < end; s++) {
            switch (steps[s].op) {
                case DIFF_EQUAL:  emit_line(out, ' ', a[steps[s].ia]); break;
                case DIFF_DELETE: emit_line(out, '-', a[steps[s].ia]); break;
                case DIFF_INSERT: emit_line(out, '+', b[steps[s].ib]); break;
            }
        }
        i = end;
    }
    return out;
}

} // namespace editspec
