// An independent reader of trace's OTLP output for the exporter tests: the official
// opentelemetry-proto definitions (as npm ships them, tools/js) loaded by protobufjs, so
// nothing here shares code with trace's C++ encoder.
//
//   node otlp_tool.js decode FILE.pb
//       prints the ExportTraceServiceRequest in FILE as OTLP/JSON (camelCase names, enums
//       as numbers, 64-bit integers as strings, trace/span ids as hex)
//   node otlp_tool.js serve LOG [RESPONSES]
//       an OTLP/HTTP receiver on 127.0.0.1 (a free port, printed as "listening PORT"):
//       each request is appended to LOG as one JSON line {method, path, headers, decoded}
//       before it is answered. RESPONSES is a comma-separated list, one per request, the
//       last one repeating: "200", "503" (with Retry-After: 0), "400:MESSAGE" (a
//       google.rpc.Status body) or "partial:N" (200 with partial_success rejecting N
//       spans). It stops when its stdin closes.
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");

const root = path.resolve(__dirname, "../..");
const modules = path.join(root, "tools/js/node_modules");
const protobuf = require(path.join(modules, "protobufjs"));
const protoRoot = path.join(modules, "@elastic/mockotlpserver");

function loadTypes() {
  const r = new protobuf.Root();
  r.resolvePath = (origin, target) => path.join(protoRoot, target);
  r.loadSync("opentelemetry/proto/collector/trace/v1/trace_service.proto");
  r.resolveAll();
  // google.rpc.Status, as the OTLP specification defines the error body.
  const rpc = protobuf.parse(
      'syntax = "proto3"; package google.rpc;' +
      "message Status { int32 code = 1; string message = 2; }").root;
  return {
    request: r.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
    response: r.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse"),
    status: rpc.lookupType("google.rpc.Status"),
  };
}

function hex(b64) { return Buffer.from(b64, "base64").toString("hex"); }

// OTLP/JSON form of a decoded request.
function toOtlpJson(type, message) {
  const obj = type.toObject(message, {longs: String, enums: Number, bytes: String});
  for (const rs of obj.resourceSpans || []) {
    for (const ss of rs.scopeSpans || []) {
      for (const span of ss.spans || []) {
        for (const key of ["traceId", "spanId", "parentSpanId"]) {
          if (span[key] !== undefined) span[key] = hex(span[key]);
        }
        for (const link of span.links || []) {
          for (const key of ["traceId", "spanId"]) {
            if (link[key] !== undefined) link[key] = hex(link[key]);
          }
        }
      }
    }
  }
  return obj;
}

function decode(file) {
  const t = loadTypes();
  const message = t.request.decode(fs.readFileSync(file));
  process.stdout.write(JSON.stringify(toOtlpJson(t.request, message)) + "\n");
}

function serve(log, responses) {
  const t = loadTypes();
  const plan = (responses || "200").split(",");
  let count = 0;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let decoded = null;
      let error = null;
      try {
        decoded = toOtlpJson(t.request, t.request.decode(body));
      } catch (e) {
        error = String(e);
      }
      fs.appendFileSync(log, JSON.stringify({
        method: req.method, path: req.url, headers: req.headers, bytes: body.length, decoded, error,
      }) + "\n");
      const step = plan[Math.min(count, plan.length - 1)];
      count += 1;
      if (step.startsWith("400:")) {
        const status = t.status.encode(t.status.create({code: 3, message: step.slice(4)})).finish();
        res.writeHead(400, {"Content-Type": "application/x-protobuf"});
        res.end(Buffer.from(status));
      } else if (step.startsWith("partial:")) {
        const answer = t.response.encode(t.response.create({
          partialSuccess: {rejectedSpans: Number(step.slice(8)), errorMessage: "spans too old"},
        })).finish();
        res.writeHead(200, {"Content-Type": "application/x-protobuf"});
        res.end(Buffer.from(answer));
      } else if (step === "503") {
        res.writeHead(503, {"Content-Type": "text/plain", "Retry-After": "0"});
        res.end("busy, try again");
      } else {
        const answer = t.response.encode(t.response.create({})).finish();
        res.writeHead(Number(step) || 200, {"Content-Type": "application/x-protobuf"});
        res.end(Buffer.from(answer));
      }
    });
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write("listening " + server.address().port + "\n");
  });
  process.stdin.on("end", () => server.close(() => process.exit(0)));
  process.stdin.resume();
}

const [cmd, a, b] = process.argv.slice(2);
if (cmd === "decode") {
  decode(a);
} else if (cmd === "serve") {
  serve(a, b);
} else {
  process.stderr.write("usage: otlp_tool.js decode FILE | serve LOG [RESPONSES]\n");
  process.exit(2);
}
