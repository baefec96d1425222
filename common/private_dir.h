// A directory only this process's user can enter (mode 0700), made fresh under $TMPDIR (else
// /tmp): where the agent keeps what its workers reach by path (the preload template's socket, the
// Python bootstrap, the worker channel's socket). The caller removes it.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace ddprun {

// "<$TMPDIR or /tmp>/<prefix>-XXXXXX", made with mkdtemp; an error naming what for (`what`).
Result<std::string> make_private_dir(std::string_view prefix, std::string_view what);

}  // namespace ddprun
