// What the SDK's shared library exports: the public API declared in these headers, marked
// DDP_API, and nothing else. The library is built with hidden visibility, so its internals
// (ddp::detail, the reducer, the process-group backends) are not ABI and cannot clash with a
// program's own symbols.
#pragma once

#define DDP_API __attribute__((visibility("default")))
