// Reference side of the tokenizer conformance test and benchmark: @lenml/tokenizers (a port
// of transformers.js) run under node.
//
//   node js_tokenize.js encode TOKENIZER_JSON CONFIG_JSON|- CORPUS_HEX OUT
//     CORPUS_HEX holds one string per line, hex-encoded bytes. Each is decoded with a
//     WHATWG TextDecoder (invalid sequences -> U+FFFD, BOM kept), encoded without added
//     BOS/EOS, and decoded back. OUT gets one line per string:
//     "<ids separated by spaces>\t<hex of the UTF-8 of decode(ids)>".
//   node js_tokenize.js bench TOKENIZER_JSON CONFIG_JSON|- TEXT_FILE
//     Encodes each NUL-separated chunk of TEXT_FILE and prints
//     "bytes=<n> seconds=<s> mb_per_s=<r> wall_mb_per_s=<w> tokens=<t>" (seconds: process
//     CPU time, which includes V8's helper threads; wall_mb_per_s: elapsed time).
"use strict";
const fs = require("fs");
const path = require("path");

const lib = require(path.resolve(__dirname, "../../tools/js/node_modules/@lenml/tokenizers"));

function load(tokenizerPath, configPath) {
  const tokenizerJSON = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
  const tokenizerConfig = configPath === "-" ? {} : JSON.parse(fs.readFileSync(configPath, "utf8"));
  const warn = console.warn;
  console.warn = () => {};  // "unknown tokenizer class" for hand-made configs
  try {
    return lib.TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  } finally {
    console.warn = warn;
  }
}

function main() {
  const [mode, tokenizerPath, configPath, input, extra] = process.argv.slice(2);
  if (!mode || !tokenizerPath || !configPath || !input) {
    console.error("usage: js_tokenize.js encode|bench TOKENIZER_JSON CONFIG_JSON|- INPUT [OUT|CHUNK]");
    process.exit(2);
  }
  const tokenizer = load(tokenizerPath, configPath);
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  if (mode === "encode") {
    const lines = fs.readFileSync(input, "utf8").split("\n");
    if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
    const out = [];
    for (const line of lines) {
      const text = decoder.decode(Buffer.from(line, "hex"));
      const ids = tokenizer.encode(text, { add_special_tokens: false });
      const back = ids.length === 0 ? "" : tokenizer.decode(ids, { skip_special_tokens: false });
      out.push(ids.join(" ") + "\t" + Buffer.from(back, "utf8").toString("hex"));
    }
    fs.writeFileSync(extra, out.join("\n") + "\n");
  } else if (mode === "bench") {
    const text = decoder.decode(fs.readFileSync(input));
    const chunks = text.split("\0");
    const bytes = Buffer.byteLength(text, "utf8") - (chunks.length - 1);
    const t0 = process.cpuUsage();
    const w0 = process.hrtime.bigint();
    let tokens = 0;
    for (const c of chunks) tokens += tokenizer.encode(c, { add_special_tokens: false }).length;
    const wall = Number(process.hrtime.bigint() - w0) / 1e9;
    const used = process.cpuUsage(t0);
    const seconds = (used.user + used.system) / 1e6;
    console.log(`bytes=${bytes} seconds=${seconds.toFixed(4)} mb_per_s=${(bytes / 1e6 / seconds).toFixed(3)} ` +
                `wall_mb_per_s=${(bytes / 1e6 / wall).toFixed(3)} tokens=${tokens}`);
  } else {
    console.error(`js_tokenize.js: unknown mode ${mode}`);
    process.exit(2);
  }
}

main();
