// Enum values by name: one table per enum, read both ways, so that each name is written once (the
// option's parser, the name in a report and the list in an error all come from it).
//
//     constexpr named<kv_reuse_mode> MODES[] = {{KV_REUSE_PREFIX, "prefix"}, {KV_REUSE_PIE, "pie"}};
//     name_of(MODES, KV_REUSE_PIE);       // "pie"
//     name_parse(MODES, "prefix", mode);  // true, mode = KV_REUSE_PREFIX
//     names_list(MODES);                  // "prefix, pie"
//
// Lowest layer: no editspec includes.
#pragma once

#include <cstddef>
#include <string>

namespace editspec {

template <typename E>
struct named {
    E value;
    const char * name;
};

// the name of v, "?" when the table has none
template <typename E, size_t N>
const char * name_of(const named<E> (&table)[N], E v) {
    for (const named<E> & n : table) {
        if (n.value == v) return n.name;
    }
    return "?";
}

// false (out untouched) when no entry has this name
template <typename E, size_t N>
bool name_parse(const named<E> (&table)[N], const std::string & name, E & out) {
    for (const named<E> & n : table) {
        if (name == n.name) {
            out = n.value;
            return true;
        }
    }
    return false;
}

// "a, b, c", for errors and help
template <typename E, size_t N>
std::string names_list(const named<E> (&table)[N]) {
    std::string out;
    for (const named<E> & n : table) out += (out.empty() ? "" : ", ") + std::string(n.name);
    return out;
}

} // namespace editspec
