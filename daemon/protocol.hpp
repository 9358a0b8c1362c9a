// musterd's wire protocol: newline-delimited JSON, one request per line, one reply per request.
//
//   request: {"version": 1, "request": "<name>", ...the request's own fields}
//   reply:   {"version": 1, "ok": true, ...the reply's fields}
//            {"version": 1, "ok": false, "error": {"code": "<code>", "message": "<one line>"}}
//
// Error codes (stable): bad_json (not a JSON object), unsupported_version, unknown_request,
// bad_request (a field missing, of the wrong type, or unknown: the message names it),
// too_large (a line over kMaxRequestBytes), internal (a bug; the message says what).
#pragma once

#include <cstddef>

namespace muster::daemon {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;

}  // namespace muster::daemon
