// Which parts of a built grammar can finish: a state is productive when some finite byte
// string leads from it to its rule's acceptance (through the calls it makes, which must
// finish too), and a rule when its start state is. A JSON Schema can describe values that
// never end ({"$ref": "#"}, an array whose items must be that array again): such a rule,
// or an alternative that recurses without a way out, would leave a constrained generation
// at a point where no token is allowed. PruneUnproductive removes every edge into what
// cannot finish, so that a walk of the grammar from a productive rule always has a way on.
//
// Ownership: works on the caller's Grammar in place. Thread safety: none (the grammar is
// being built). Errors: none; the caller decides what an unproductive rule means.
#pragma once

#include <vector>

#include "recorder/grammar/grammar.h"

namespace trace::recorder::grammar {

// Drops the byte edges into unproductive states and the calls of unproductive rules or
// into unproductive states. Returns, per rule, whether it is productive. Linear in the
// grammar's size (a worklist over reverse edges, not repeated sweeps).
std::vector<bool> PruneUnproductive(Grammar* grammar);

}  // namespace trace::recorder::grammar
