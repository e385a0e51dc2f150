#include "store/verify_queue.h"

#include <string>

#include "base/process_identity.h"

namespace trace::store {

std::string ThisWorkerName() {
  const ProcessIdentity self = CurrentProcess();
  return (self.host.empty() ? std::string("localhost") : self.host) + ":" +
         std::to_string(self.pid);
}

}  // namespace trace::store
