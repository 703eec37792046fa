// The reference's side of benchmarks/tokenize_speed.sh: npm's gpt-3-encoder (Encoder.js) encodes
// every file given, one fortune (or paragraph) at a time, and prints bytes, tokens and seconds.
// Pieces, not whole files: Encoder.js concatenates its output array once per token, which is
// quadratic in a file's length; per piece it runs at its own speed.
'use strict';
const fs = require('fs');
const path = require('path');
const [encoderDir, ...files] = process.argv.slice(2);
const { encode } = require(path.resolve(encoderDir, 'Encoder.js'));
const texts = files.map((f) => fs.readFileSync(f, 'utf8'));
let bytes = 0;
let tokens = 0;
const start = process.hrtime.bigint();
for (const text of texts) {
  bytes += Buffer.byteLength(text, 'utf8');
  for (const piece of text.split(/(?<=\n%\n|\n\n)/)) tokens += encode(piece).length;
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ bytes, tokens, seconds }));
