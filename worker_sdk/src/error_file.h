// torchrun's error file: what a failed worker leaves at TORCHELASTIC_ERROR_FILE so that its
// launcher's failure report shows the cause (ddprun and torchrun read the same format):
//
//   {"message": {"message": "<Type>: <text>",
//                "extraInfo": {"py_callstack": "<stack>", "timestamp": "<epoch seconds>"}}}
//
// The writer runs inside signal handlers (a worker dying of SIGSEGV), so it escapes the JSON
// by hand into a small stack buffer: a JSON library would allocate. LibTorch-free.
#pragma once

#include <string>

namespace ddp::detail {

// TORCHELASTIC_ERROR_FILE, or empty when the launcher set none.
std::string error_file_from_env();

// Replaces `path` with the error JSON. Returns false (and leaves errno) when the file cannot
// be written; an empty path writes nothing and returns false. Async-signal-safe.
bool write_error_file(const char* path, const char* message, const char* callstack,
                      long timestamp_seconds);

}  // namespace ddp::detail
