// Agreement between the ranks of a data-parallel job, at the points where a
// rank can fail on its own (config, data, checkpoint load and save). Every
// rank calls these at the same points. A failure on any rank becomes the same
// failure on every rank, so no rank is left waiting in a collective: rank 0
// returns the first failing rank's message (prefixed with its rank), the other
// ranks return the same code with an empty message (main prints nothing), so
// the user reads one line.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/checkpoint.h"
#include "core/status.h"
#include "comm/comm.h"
#include "runtime/config.h"

namespace crucible::runtime {

Status agree(comm::Comm& comm, const Status& local);

// The ranks of `comm` sharing the verification of a checkpoint
// (ckpt::find_latest_valid): each hashes its share of the files, and the
// verdicts are agreed with every rank getting the failing file's message.
ckpt::VerifyShare verify_share(comm::Comm& comm);

// Makes every rank use rank 0's run directory (each rank resolved its own
// default, e.g. a timestamp), then refuses to start when any rank's resolved
// config differs from rank 0's, naming the first differing key on that rank:
// "[dist] rank 1's config differs from rank 0's: train.seed = 5, rank 0 has 7".
Status agree_on_config(comm::Comm& comm, Config& cfg, std::string& run_dir);
// The same for any run's resolved config as JSON (`crucible sim`'s).
Status agree_on_run(comm::Comm& comm, const nlohmann::json& config, std::string& run_dir);

// Each rank writes the trace events it recorded to RUN/trace.rank{R}.json;
// rank 0 merges them into RUN/trace.json (one process per rank) and removes
// the pieces. Collective. Nothing when no rank recorded anything.
Status write_run_trace(comm::Comm& comm, const std::string& run);

}  // namespace crucible::runtime
