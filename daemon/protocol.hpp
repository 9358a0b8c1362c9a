// musterd's wire protocol: newline-delimited JSON, one request per line, one reply per request.
//
//   request: {"version": 1, "request": "<name>", ...the request's own fields}
//   reply:   {"version": 1, "ok": true, ...the reply's fields}
//            {"version": 1, "ok": false, "error": {"code": "<code>", "message": "<one line>"}}
//
// Error codes (stable): bad_json (not a JSON object), unsupported_version, unknown_request,
// bad_request (a field missing, of the wrong type, or unknown: the message names it),
// too_large (a line over kMaxRequestBytes), denied (a job-scoped request from a uid that is
// neither root nor the job's owner), not_found (a job or step this node never recorded),
// unavailable (Slurm could not be asked who owns the job), store (the node store failed: a full
// disk; the message names the file and the fix), busy (too many requests wait for the store;
// try again), internal (a bug; the message says what).
//
// Requests: env (env_request.hpp), preflight (preflight_request.hpp), record
// (record_request.hpp), job (job_request.hpp), status (status_request.hpp).
#pragma once

#include <cstddef>

namespace muster::daemon {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;

}  // namespace muster::daemon
