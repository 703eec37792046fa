#pragma once
// How much memory this machine can give now, for decisions that must never fail a run for want of
// it (streaming features rather than holding them, refusing to inflate an archive member past it).
namespace noeira::io {

// MemAvailable of /proc/meminfo in bytes, or the largest double where it does not say.
double memory_available_bytes();

}  // namespace noeira::io
