#include "store/copy.h"

namespace trace::store {

Status WriteRunCopy(Store& to, const proto::RunHeader& header,
                    const std::vector<proto::Event>& events) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].seq() != i + 1) {
      return FailedPrecondition("run " + header.run_id() + ": event " + std::to_string(i + 1) +
                                " has seq " + std::to_string(events[i].seq()) +
                                "; only whole runs are copied");
    }
  }
  WriterOptions options;
  options.commit_interval_ms = 1000;  // one Flush at the end commits everything
  TRACE_ASSIGN_OR_RETURN(auto writer, to.BeginRun(header, options));
  Status st = Status::Ok();
  for (const proto::Event& e : events) {
    auto seq = writer->Append(e);  // seqs come out as in the source: 1, 2, 3, ...
    if (!seq.ok()) {
      st = seq.status();
      break;
    }
  }
  if (st.ok()) st = writer->Flush();
  writer.reset();
  if (!st.ok()) {
    DeleteOptions force;
    force.force = true;
    (void)to.DeleteRun(header.run_id(), force);
    return st.WithContext("copying run " + header.run_id() + " to " + to.path());
  }
  return Status::Ok();
}

}  // namespace trace::store
