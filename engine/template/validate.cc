// ValidateProgram: the check, before any render, that a program names only the filters
// and tests the renderer implements (the tables FindFilter and FindTest read, filters.cc and
// builtins.cc), so that an unsupported one is reported as such (with its line) even on a
// path the render would not take.
#include <string>

#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

namespace {

Status ValidateExpr(const Expr& e, const std::string& origin) {
  auto where = [&](const std::string& what) {
    return Unsupported("template " + origin + " line " + std::to_string(e.line) +
                       ": unsupported construct: " + what);
  };
  if (e.kind == ExprKind::kFilter && !FindFilter(e.name)) {
    return where("filter " + Quote(e.name));
  }
  if (e.kind == ExprKind::kTest && !FindTest(e.name)) {
    return where("test " + Quote(e.name));
  }
  for (const auto& c : e.children) {
    if (c) TRACE_RETURN_IF_ERROR(ValidateExpr(*c, origin));
  }
  for (const auto& c : e.args) TRACE_RETURN_IF_ERROR(ValidateExpr(*c, origin));
  for (const auto& [k, c] : e.kwargs) TRACE_RETURN_IF_ERROR(ValidateExpr(*c, origin));
  return Status::Ok();
}

Status ValidateBody(const Body& body, const std::string& origin) {
  for (const auto& s : body) {
    if (s->expr) TRACE_RETURN_IF_ERROR(ValidateExpr(*s->expr, origin));
    if (s->filter) TRACE_RETURN_IF_ERROR(ValidateExpr(*s->filter, origin));
    for (const auto& d : s->defaults) {
      if (d) TRACE_RETURN_IF_ERROR(ValidateExpr(*d, origin));
    }
    for (const auto& [cond, b] : s->branches) {
      TRACE_RETURN_IF_ERROR(ValidateExpr(*cond, origin));
      TRACE_RETURN_IF_ERROR(ValidateBody(b, origin));
    }
    TRACE_RETURN_IF_ERROR(ValidateBody(s->body, origin));
    TRACE_RETURN_IF_ERROR(ValidateBody(s->else_body, origin));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateProgram(const Program& program) {
  return ValidateBody(program.body, program.origin);
}

}  // namespace trace::engine::tmpl
