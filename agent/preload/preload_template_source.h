// The preload template's program (agent/preload/template.py), compiled into the agent so that
// the launcher never depends on where a file was installed: PreloadLauncher writes it to its
// private directory and runs it with the workers' Python.
#pragma once

namespace ddprun::agent {

extern const char kPreloadTemplateSource[];

}  // namespace ddprun::agent
