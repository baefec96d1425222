// Files in the integration tests: a self-removing temp directory, small read/write helpers,
// and waiting for a file to appear (workers create marker files atomically: write a temp file,
// then rename it into place, so a marker that exists is complete).
#pragma once

#include <string>
#include <vector>

#include "tests/integration/deadline.h"
#include "tests/support/temp_dir.h"
#include "tests/support/text_file.h"

namespace ddprun::testing {

// Waits until `path` exists, or the deadline passes. Event-driven: inotify on the parent
// directory (which must exist) for creations and renames. True when it exists.
bool wait_for_file(const std::string& path, Deadline deadline);

// All of them (each with the same deadline).
bool wait_for_files(const std::vector<std::string>& paths, Deadline deadline);

// Writes `text` to `path` atomically (temp file + rename), with the given mode bits.
void write_text_file(const std::string& path, const std::string& text, unsigned mode = 0644);

// Creates a FIFO. Workers use FIFOs for blocking, event-driven hand-offs.
void make_fifo(const std::string& path);

// The names in `dir` (not recursive), sorted; empty when it does not exist.
std::vector<std::string> list_dir(const std::string& dir);

}  // namespace ddprun::testing
