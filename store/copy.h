// Writing a run read from one store into another (`trace push` / `trace pull`): the same
// run id, header and events (seqs, wall times, every field), so that the copy exports
// exactly as the original. Backend-neutral: SQLite and PostgreSQL stores alike.
//
// Ownership: borrows the store and values. Thread safety: as Store. Errors: AlreadyExists
// when `to` has the run; FailedPrecondition for events that do not start at seq 1 or have
// gaps (a damaged or partial read); the destination's write errors otherwise. A copy that
// fails part-way is deleted again, so a destination never holds a shortened copy.
#pragma once

#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "store/store.h"

namespace trace::store {

// `events` in seq order, as Store::LoadEvents returns them; a final RunEnd ends the copy.
Status WriteRunCopy(Store& to, const proto::RunHeader& header,
                    const std::vector<proto::Event>& events);

}  // namespace trace::store
