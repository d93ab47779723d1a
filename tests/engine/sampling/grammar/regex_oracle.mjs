// The outside oracle for regex_test.cc: Node's own RegExp.
//
// Usage: node regex_oracle.mjs CASES
// CASES has one case a line, four tab-separated fields:
//   mode   "whole" (the text must match entirely: ^(?:p)$) or "search"
//   flags  the RegExp flags ("u", or "" for the Annex B dialect)
//   hex    the pattern's UTF-8 bytes in hex
//   hex    the text's UTF-8 bytes in hex
// Prints one line per case: 1 (matches), 0 (does not), E (the pattern is
// a syntax error).
import { readFileSync } from 'node:fs';

const decode = (hex) => Buffer.from(hex, 'hex').toString('utf8');
const lines = readFileSync(process.argv[2], 'utf8').split('\n');
const out = [];
for (const line of lines) {
  if (line.length === 0) continue;
  const [mode, flags, pattern, text] = line.split('\t');
  const p = decode(pattern);
  let re;
  try {
    re = new RegExp(mode === 'whole' ? '^(?:' + p + ')$' : p, flags);
  } catch (e) {
    out.push('E');
    continue;
  }
  out.push(re.test(decode(text)) ? '1' : '0');
}
process.stdout.write(out.join('\n') + '\n');
