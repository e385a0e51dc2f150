#include "store/verify_queue.h"

#include <unistd.h>

#include <string>

namespace trace::store {

std::string ThisWorkerName() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] ? host : "localhost") + ":" + std::to_string(getpid());
}

}  // namespace trace::store
