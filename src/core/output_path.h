// Where crucible may write: the one check every writer makes before its
// first byte, so an output path never destroys what it names.
//
// A file target (export -o, report -o, probe --json, plan -o, bench --out,
// and every file crucible writes itself) must be absent or a regular file;
// its directory must exist; and, unless the writer is the checkpoint writer,
// it must not lie inside a run's checkpoint directory. Refused, with
// Status::invalid (exit 2) naming the path and the reason:
//   - an empty path, or one ending in '/';
//   - a directory, a character or block device, a FIFO, a socket;
//   - a symbolic link, whatever it points to: crucible replaces the file it
//     is given (temporary beside it, renamed over it), so writing "through" a
//     link would replace the link, not its target; the user names the file;
//   - a path whose directory does not exist or is not a directory;
//   - a path inside a run's checkpoint directory (an ancestor named `ckpt`
//     beside a `config.toml`, or holding a `latest` file): overwriting a
//     checkpoint's file makes the next resume fall back a checkpoint.
// A directory target (curate -o, tokenize -o) must be absent (its nearest
// existing ancestor a directory: missing parents are created) or a
// directory, not a symbolic link, and outside any checkpoint directory.
//
// The CLI calls these with its flag's name before doing any work;
// AtomicFile::open (core/file_io.h) enforces check_output_path again, so no
// writer can skip it. The check and the rename are not one atomic step: a
// path changed between them by another process is not detected (the rename
// still never writes into a device or through a link). Thread-compatible.
#pragma once
#include <string>

#include "core/status.h"

namespace crucible {

enum class OutputScope {
  kAnywhere,    // not inside a run's checkpoint directory
  kCheckpoint,  // the checkpoint writer itself: inside RUN/ckpt/ is its job
};

// `what` starts the message: "[export] -o" gives
// "[export] -o R/ckpt/step_0000008/model.safetensors: is inside the
// checkpoint directory R/ckpt of a run ...".
Status check_output_path(const std::string& path, const std::string& what = "[io]",
                         OutputScope scope = OutputScope::kAnywhere);
Status check_output_dir(const std::string& path, const std::string& what);

}  // namespace crucible
