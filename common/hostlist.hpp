// Slurm hostlist expressions: expand "gpu[01-04],login1" into host names, and compress host names
// back into the shortest form Slurm itself writes (`scontrol show hostnames` / `show hostlist`).
//
// The grammar and the output follow Slurm 23.02 and later (src/common/hostlist.c), with muster
// stricter where Slurm silently accepts nonsense (see "Differences from Slurm" below).
// This file is pure string work: no I/O, no environment, no sorting, no de-duplication (that is
// `scontrol show hostlistsorted`, which muster does not need), no multi-dimensional (BlueGene/Cray
// "box") names.
//
// Grammar of a hostlist (what expand_hostlist accepts):
//   list      := sep* [ item ( sep+ item )* ] sep*      whitespace-only or empty: no hosts
//   sep       := ',' | ' ' | '\t' | '\n' | '\r'         at most one ',' between two items
//   item      := ( text | '[' ranges ']' )+             e.g. n7, n[1-3], rack[1-2]-n[01-04]-ib
//   text      := any characters but sep, '[' and ']'
//   ranges    := range ( ',' range )*                   commas inside brackets do not split items
//   range     := number | number '-' number             low <= high; no step, no sign, no spaces
// A range is written with the width of its LOW bound: n[01-3] -> n01 n02 n03, n[1-03] -> n1 n2 n3,
// n[8-10] -> n8 n9 n10. Items expand in the order written, duplicates kept. An item with several
// bracket groups expands in Slurm's order: the last group varies fastest, then the first, the
// second, ..., the second-to-last slowest (a[1-2]b[1-2]c[1-2] -> a1b1c1 a1b1c2 a2b1c1 a2b1c2
// a1b2c1 ...); with two groups that is the natural order (r[1-2]-n[1-2] -> r1-n1 r1-n2 r2-n1 ...).
// Text after the last ']' is appended to every host (n[1-2]-ib -> n1-ib n2-ib), as in 23.02+.
//
// Differences from Slurm (all are errors in muster, where Slurm guesses or mangles):
//   empty items (a,,b  ,a  a,), empty brackets or ranges (n[]  n[1,,2]), unbalanced or nested
//   brackets (n[1-3  n]1  n[[1]), whitespace inside brackets, numbers above 2^64-1 (Slurm clamps),
//   signs (Slurm's strtoul takes n[+1]). Slurm caps one range at 65,536 hosts; muster caps the
//   whole list instead (see "Limits"). Newline and carriage return also separate items.
//
// Limits, all checked while parsing, before any host is built (so a short list such as
// n[<100,000 zeros>1-1048576] is refused, not given ~100 GB):
//   kMaxHostlistHosts      hosts in one list
//   kMaxHostNameLength     characters in one host name (255, POSIX's _POSIX_HOST_NAME_MAX)
//   kMaxHostlistNameBytes  characters of all the host names together (no separators counted)
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace muster {

// The most hosts one hostlist may name; larger lists are rejected before anything is allocated.
inline constexpr std::size_t kMaxHostlistHosts = std::size_t{1} << 20;  // 1,048,576
// The longest host name a hostlist may produce, and compress_hostlist accepts.
inline constexpr std::size_t kMaxHostNameLength = 255;
// The most characters all host names of one hostlist may hold together (64 MiB); this bounds
// what expand_hostlist allocates for the names (plus 32 bytes of std::string per host).
inline constexpr std::size_t kMaxHostlistNameBytes = std::size_t{64} << 20;

// How big a hostlist is once expanded.
struct hostlist_size {
  std::size_t num_hosts = 0;   // hosts it names
  std::size_t name_bytes = 0;  // characters of all the names together, no separators
};

// Expands a hostlist into host names, in Slurm's order (see the grammar above).
// Throws muster::error(errc::invalid_input) for malformed input or a list over one of the limits
// (more than kMaxHostlistHosts hosts, a name longer than kMaxHostNameLength, or more than
// kMaxHostlistNameBytes of names); the message quotes the list, gives the 1-based column of the
// fault (for a limit: the item that crosses it) and a caret under it.
std::vector<std::string> expand_hostlist(std::string_view list);

// The number of hosts expand_hostlist would return, computed without materialising them.
// Same validation and errors as expand_hostlist (including the limits).
std::size_t count_hostlist(std::string_view list);

// The number of hosts and of name characters expand_hostlist would produce, computed without
// materialising them; lets a caller that joins several lists check the limits on the sum.
// Same validation and errors as expand_hostlist (including the limits).
hostlist_size measure_hostlist(std::string_view list);

// Calls visit once per host, in expand_hostlist's order, with a view that is valid only during
// the call. Validates the whole list (and the limits) before the first call; same errors.
void for_each_host(std::string_view list, const std::function<void(std::string_view)>& visit);

// Compresses host names the way `scontrol show hostlist` does (hostlist_ranged_string):
// never sorts; a host continues the previous range when it has the same prefix, the next number
// and a compatible zero padding (Slurm's _width_equiv); consecutive ranges with the same prefix
// share one bracket: n1,n2,n3,n5 -> n[1-3,5]; n9,n10 -> n[9-10]; n1,n02 -> n[1,02]; names without
// a numeric suffix stay as they are. expand_hostlist(compress_hostlist(x)) == x for every x.
// An empty vector gives "". Throws muster::error(errc::invalid_input) for a host that is empty,
// longer than kMaxHostNameLength, or contains a separator or a bracket (it could not
// round-trip), naming it and its index.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace muster
