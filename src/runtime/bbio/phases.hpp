#pragma once
// I/O phases: the trace file (HARMONIA_PHASE_TRACE) that declared phase markers and detected
// phases are written to, and the runtime detector (Harmonia paper, section IV-A): I/O on staged
// files is grouped into phases separated by idle gaps longer than HARMONIA_PHASE_GAP.

#include <cstddef>
#include <string>

namespace harmonia::bbio {

/// `text` as a JSON string literal.
std::string json_string(const std::string& text);
/// Appends one JSON object (without newline) as a line to the trace file `path` (nothing when
/// `path` is empty).
void trace_line(const std::string& path, const std::string& json);
/// Seconds since the epoch, for trace timestamps.
double wall_clock();

/// A read or write of `bytes` on the staged file at `path` just happened.
void note_io(const std::string& path, size_t bytes, bool write);
/// Writes out the phase in progress, if any (at exit).
void end_detected_phase();

}  // namespace harmonia::bbio
